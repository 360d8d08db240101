import { ConfigError } from './errors.js';
import type { EnvironmentInfo, IdentityScopeName } from './types.js';

/**
 * Where the embedded local service is reached before it is started; the CLI fills in the real port
 * (see attachLocalService).
 */
export const LOCAL_PLACEHOLDER_URL = 'http://127.0.0.1';

/** The environments of docs/wire-protocol.md §11. Integ and prod need different keys and give different raw UIDs. */
export const ENVIRONMENTS: Readonly<Record<string, EnvironmentInfo>> = Object.freeze({
  local: { name: 'local', baseUrl: LOCAL_PLACEHOLDER_URL, scope: 'UID2', isPublic: false },
  integ: { name: 'integ', baseUrl: 'https://operator-integ.uidapi.com', scope: 'UID2', isPublic: true },
  prod: { name: 'prod', baseUrl: 'https://global.prod.uidapi.com', scope: 'UID2', isPublic: true },
  'prod-use': { name: 'prod-use', baseUrl: 'https://prod.uidapi.com', scope: 'UID2', isPublic: true },
  'prod-usw': { name: 'prod-usw', baseUrl: 'https://usw.prod.uidapi.com', scope: 'UID2', isPublic: true },
  'prod-au': { name: 'prod-au', baseUrl: 'https://au.prod.uidapi.com', scope: 'UID2', isPublic: true },
  'prod-jp': { name: 'prod-jp', baseUrl: 'https://jp.prod.uidapi.com', scope: 'UID2', isPublic: true },
  'prod-sg': { name: 'prod-sg', baseUrl: 'https://sg.prod.uidapi.com', scope: 'UID2', isPublic: true },
  'euid-integ': { name: 'euid-integ', baseUrl: 'https://integ.euid.eu', scope: 'EUID', isPublic: true },
  'euid-prod': { name: 'euid-prod', baseUrl: 'https://prod.euid.eu', scope: 'EUID', isPublic: true },
});

/**
 * Used when no flag, variable or profile names an environment. Integ, because it is where every
 * integration starts (keys are issued for it first), it cannot touch production identities, and a prod
 * key sent there fails loudly with a 401; `local` is never a silent default because its raw UIDs are fake.
 */
export const DEFAULT_ENV = 'integ';

export function environmentNames(): string[] {
  return Object.keys(ENVIRONMENTS);
}

/** The environment named `name` (case-insensitive); an unknown name lists the valid ones. */
export function findEnvironment(name: string, from: string): EnvironmentInfo {
  const env = ENVIRONMENTS[name.trim().toLowerCase()];
  if (!env) {
    throw new ConfigError(
      `unknown environment '${name}' (from ${from}): choose one of ${environmentNames().join(', ')}`,
    );
  }
  return env;
}

export function parseScope(value: string, from: string): IdentityScopeName {
  const upper = value.trim().toUpperCase();
  if (upper === 'UID2' || upper === 'EUID') return upper;
  throw new ConfigError(`unknown identity scope '${value}' (from ${from}): choose UID2 or EUID`);
}

/**
 * Which family of raw UIDs an environment produces. All UID2 prod regions share one salt set, so a state
 * file made against one region stays valid in another; integ, prod, EUID and local never mix.
 */
const FAMILY: Readonly<Record<string, string>> = {
  local: 'local',
  integ: 'integ',
  prod: 'prod',
  'prod-use': 'prod',
  'prod-usw': 'prod',
  'prod-au': 'prod',
  'prod-jp': 'prod',
  'prod-sg': 'prod',
  'euid-integ': 'integ',
  'euid-prod': 'prod',
};

export function environmentFamily(name: string): string | undefined {
  return FAMILY[name];
}

/** The environment whose base URL this is, if any (so `--base-url https://prod.euid.eu` means euid-prod). */
export function environmentForUrl(origin: string): EnvironmentInfo | undefined {
  return Object.values(ENVIRONMENTS).find((e) => e.name !== 'local' && e.baseUrl === origin);
}
