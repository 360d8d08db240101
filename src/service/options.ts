import { randomBytes } from 'node:crypto';
import { decodeKey } from '../protocol/index.js';
import { ALL_ROLES, isRole, type Role } from './auth.js';
import type { IdentityScope, TokenLifetimes } from './contracts.js';
import { checkFaultOptions, type FaultOptions } from './faults.js';

/** Options of startService. Everything is optional; see each field for its default. */
export interface ServiceOptions {
  /** Interface to listen on (default 127.0.0.1). */
  host?: string;
  /** Port; 0 (default) picks a free one. */
  port?: number;
  /** The one API key the service accepts (default: a fresh random `UID2-L-L-…` / `EUID-L-L-…` key). */
  apiKey?: string;
  /** Client secret, base64 of 32 bytes (default: fresh random bytes). */
  clientSecret?: string;
  /** Everything the service computes (salts, buckets, token keys, fault draws) derives from it. Default 'uid2-batch-local'. */
  seed?: string;
  /**
   * Identity time at start, Unix ms (default: real now); it then runs at real speed and jumps on /_local/clock. Its
   * distance from real time at start also skews the service's envelope clock for good, which is how a service whose
   * clock is off is simulated; to reach a given identity date without that skew, start without it and POST
   * /_local/clock {"set": ...}.
   */
  nowMs?: number;
  /** UID2 (default) or EUID. */
  scope?: IdentityScope;
  /** Roles of the API key (default: all four). */
  roles?: readonly Role[];
  /** Token lifetimes in seconds (defaults 3600 / 900 / 86400). */
  lifetimes?: Partial<TokenLifetimes>;
  /** CSV of opt-outs loaded at start (columns: email, phone, email_hash, phone_hash, advertising_id, since_ms). */
  optoutFile?: string;
  faults?: FaultOptions;
  /** Items allowed per identity-map request (default 5000). */
  maxMapItems?: number;
}

export interface ResolvedOptions {
  host: string;
  port: number;
  apiKey: string;
  clientSecret: string;
  clientKey: Buffer;
  seed: string;
  nowMs: number;
  scope: IdentityScope;
  roles: ReadonlySet<Role>;
  lifetimes: TokenLifetimes;
  optoutFile: string | undefined;
  faults: FaultOptions;
  maxMapItems: number;
}

/** A service option or input file that cannot be used; the message says what and how to fix it. */
export class ServiceSetupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ServiceSetupError';
  }
}

export const DEFAULT_SEED = 'uid2-batch-local';
export const DEFAULT_LIFETIMES: TokenLifetimes = { identityExpiresS: 3600, refreshFromS: 900, refreshExpiresS: 86400 };
export const DEFAULT_MAX_MAP_ITEMS = 5000;

export function resolveOptions(options: ServiceOptions): ResolvedOptions {
  const scope = options.scope ?? 'UID2';
  if (scope !== 'UID2' && scope !== 'EUID') throw new ServiceSetupError(`scope must be UID2 or EUID`);
  const port = options.port ?? 0;
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new ServiceSetupError('port must be an integer from 0 to 65535 (0 picks a free port)');
  const apiKey = options.apiKey ?? `${scope}-L-L-${randomBytes(18).toString('base64url')}`;
  if (apiKey.length === 0 || /\s/.test(apiKey))
    throw new ServiceSetupError('the API key must be non-empty and contain no spaces');
  const clientSecret = options.clientSecret ?? randomBytes(32).toString('base64');
  let clientKey: Buffer;
  try {
    clientKey = decodeKey(clientSecret);
  } catch {
    throw new ServiceSetupError('the client secret must be base64 of 32 bytes (44 characters)');
  }
  const seed = options.seed ?? DEFAULT_SEED;
  if (seed.length === 0) throw new ServiceSetupError('the seed must not be empty');
  const nowMs = options.nowMs ?? Date.now();
  if (!(Number.isFinite(nowMs) && nowMs >= 0 && nowMs <= Date.UTC(9999, 11, 31))) {
    throw new ServiceSetupError('the start time must be Unix ms between 1970-01-01 and 9999-12-31');
  }
  const roles = options.roles ?? ALL_ROLES;
  for (const role of roles) {
    if (!isRole(role)) throw new ServiceSetupError(`unknown role ${String(role)}; roles are ${ALL_ROLES.join(', ')}`);
  }
  const lifetimes = { ...DEFAULT_LIFETIMES, ...options.lifetimes };
  for (const [name, value] of Object.entries(lifetimes)) {
    if (!Number.isInteger(value) || value <= 0)
      throw new ServiceSetupError(`token lifetime ${name} must be a whole number of seconds > 0`);
  }
  if (
    !(lifetimes.refreshFromS <= lifetimes.identityExpiresS && lifetimes.identityExpiresS <= lifetimes.refreshExpiresS)
  ) {
    throw new ServiceSetupError(
      'token lifetimes must satisfy refresh-from <= identity-lifetime <= refresh-lifetime, as on the operator',
    );
  }
  const faults = { ...options.faults };
  const faultProblem = checkFaultOptions(faults);
  if (faultProblem !== null) throw new ServiceSetupError(faultProblem);
  const maxMapItems = options.maxMapItems ?? DEFAULT_MAX_MAP_ITEMS;
  if (!Number.isInteger(maxMapItems) || maxMapItems < 1)
    throw new ServiceSetupError('maxMapItems must be a whole number >= 1');
  return {
    host: options.host ?? '127.0.0.1',
    port,
    apiKey,
    clientSecret,
    clientKey,
    seed,
    nowMs,
    scope,
    roles: new Set(roles),
    lifetimes,
    optoutFile: options.optoutFile,
    faults,
    maxMapItems,
  };
}
