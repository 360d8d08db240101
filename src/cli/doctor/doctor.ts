import { credentialsForDisplay, type ResolvedConfig } from '../../config/index.js';
import {
  classifyFailure,
  refreshIdentity,
  refreshInputOf,
  testIdentity,
  type Failure,
  type TokenIdentity,
} from '../../pipeline/tokens/tokens.js';
import { proxyLine, type ServiceClient } from '../../pipeline/run/connection.js';
import { EXIT } from '../shared/exit-codes.js';
import type { Role } from './doctor-roles.js';

export { parseRoles, ROLES, type Role } from './doctor-roles.js';

/**
 * `doctor`: can this machine, with this configuration, use the service? Each check says pass / warn / fail / skip
 * and, when it fails, how to fix it. Secrets are never printed: only where each one came from.
 */

export type CheckStatus = 'pass' | 'warn' | 'fail' | 'skip';

export interface Check {
  name: string;
  status: CheckStatus;
  detail: string;
  fix?: string;
}

export interface DoctorReport {
  ok: boolean;
  exitCode: number;
  checks: Check[];
}

/** Envelope times further apart than this fail the check: the docs' budget (the operator's cut is ~2 min). */
export const SKEW_FAIL_MS = 60_000;
/** Half the budget: still accepted, but a slow request or retry could push it out. */
export const SKEW_WARN_MS = 30_000;

export type Reachability = { ok: true; httpStatus: number; ms: number } | { ok: false; message: string };

export interface DoctorDeps {
  /** Throws ConfigError (or UserError) when the configuration cannot be resolved. */
  resolve(): ResolvedConfig;
  /** A client for the resolved configuration; starts the embedded service for --env local. */
  open(config: ResolvedConfig): Promise<{ client: ServiceClient; baseUrl: string; close(): Promise<void> }>;
  /** GET {baseUrl}/ops/healthcheck. */
  healthcheck(baseUrl: string): Promise<Reachability>;
}

export interface DoctorOptions {
  roles: readonly Role[];
}

const ROLE_NAME: Record<Role, string> = {
  mapper: 'MAPPER',
  generator: 'GENERATOR',
  optout: 'MAPPER, SHARER or ID_READER',
};
const ROLE_CHECK: Record<Role, string> = {
  mapper: 'mapper role',
  generator: 'generator role',
  optout: 'opt-out status',
};
const ROLE_USE: Record<Role, string> = {
  mapper: 'needed by map and remap-due',
  generator: 'needed by token generate and validate',
  optout: 'needed by optout-check',
};

const SECRET_FIX =
  'use the client secret issued together with this API key (UID2_CLIENT_SECRET or --client-secret-file); integ and prod have different pairs';
const NTP_FIX =
  "set this machine's clock right: turn on NTP time sync (e.g. `timedatectl set-ntp true`, `sntp -sS time.apple.com`, or `w32tm /resync` on Windows)";

type CallResult<T> = { ok: true; value: T } | { ok: false; failure: Failure };

async function attempt<T>(call: () => Promise<T>): Promise<CallResult<T>> {
  try {
    return { ok: true, value: await call() };
  } catch (err) {
    return { ok: false, failure: classifyFailure(err) };
  }
}

function describeConfig(cfg: ResolvedConfig): string {
  const d = credentialsForDisplay(cfg);
  const envFrom =
    d.envSource === 'default'
      ? 'the default'
      : d.envSource === 'flag'
        ? '--env'
        : d.envSource === 'env'
          ? 'UID2_ENV'
          : 'the profile';
  const profile = d.profile ? `, profile '${d.profile}'${d.configFile ? ` in ${d.configFile}` : ''}` : '';
  // the embedded service's address is its own; any other says which setting gave it
  const url = cfg.isLocal ? d.baseUrl : `${d.baseUrl} (${d.baseUrlFrom})`;
  return `env ${d.env} (from ${envFrom}), ${url}, scope ${d.scope}${profile}`;
}

export async function runDoctor(options: DoctorOptions, deps: DoctorDeps): Promise<DoctorReport> {
  const checks: Check[] = [];
  const add = (c: Check): void => void checks.push(c);
  const skipRest = (names: string[], why: string): void => {
    for (const name of names) add({ name, status: 'skip', detail: why });
  };
  const later = [
    'reachability',
    'API key',
    'client secret',
    'clock skew',
    ...options.roles.map((r) => ROLE_CHECK[r]),
    'token refresh',
  ];

  let cfg: ResolvedConfig;
  try {
    cfg = deps.resolve();
  } catch (err) {
    add({
      name: 'configuration',
      status: 'fail',
      detail: err instanceof Error ? err.message : String(err),
      fix: 'fix the setting named above',
    });
    skipRest(['credentials', ...later], 'no usable configuration');
    return finish(checks);
  }
  add({ name: 'configuration', status: 'pass', detail: describeConfig(cfg) });

  const shown = credentialsForDisplay(cfg);
  const missing = [
    cfg.apiKey || cfg.isLocal ? undefined : 'API key',
    cfg.clientSecret || cfg.isLocal ? undefined : 'client secret',
  ].filter(Boolean);
  if (missing.length > 0) {
    add({
      name: 'credentials',
      status: 'fail',
      detail: `API key: ${shown.apiKey}; client secret: ${shown.clientSecret}`,
      fix: 'set UID2_API_KEY and UID2_CLIENT_SECRET (or pass --api-key-file and --client-secret-file, or name a --profile)',
    });
  } else {
    add({
      name: 'credentials',
      status: 'pass',
      detail: `API key from ${shown.apiKey}; client secret from ${shown.clientSecret} (values not shown)`,
    });
  }

  let connection: Awaited<ReturnType<DoctorDeps['open']>>;
  try {
    connection = await deps.open(cfg);
  } catch (err) {
    add({
      name: 'reachability',
      status: 'fail',
      detail: err instanceof Error ? err.message : String(err),
      fix: 'see the message above',
    });
    skipRest(later.slice(1), 'no connection');
    return finish(checks);
  }
  // the proxy in use, when there is one (a direct connection needs no line)
  const proxy = proxyLine(connection.client);
  if (proxy !== undefined) add({ name: 'proxy', status: 'pass', detail: proxy });
  try {
    const reach = await deps.healthcheck(connection.baseUrl);
    if (!reach.ok) {
      add({
        name: 'reachability',
        status: 'fail',
        detail: `cannot reach ${connection.baseUrl}: ${reach.message}`,
        fix: 'check the URL (--env / --base-url), DNS, and any proxy or firewall between this machine and the service',
      });
      skipRest(later.slice(1), 'the service cannot be reached');
      return finish(checks);
    }
    add(
      reach.httpStatus === 200
        ? { name: 'reachability', status: 'pass', detail: `GET /ops/healthcheck answered OK in ${reach.ms} ms` }
        : {
            name: 'reachability',
            status: 'warn',
            detail: `GET /ops/healthcheck answered HTTP ${reach.httpStatus}; the API calls below tell whether the service works`,
          },
    );
    if (missing.length > 0) {
      skipRest(later.slice(1), `no ${missing.join(' and no ')}`);
      return finish(checks);
    }
    const { authRefused } = await checkService(connection.client, options, add);
    return finish(checks, authRefused);
  } finally {
    await connection.close();
  }
}

async function checkService(
  client: ServiceClient,
  options: DoctorOptions,
  add: (c: Check) => void,
): Promise<{ authRefused: boolean }> {
  const emailHash = testIdentity('email', 'validate').hash;
  const results = new Map<Role, CallResult<string>>();
  let identity: TokenIdentity | undefined;
  let rawUid: string | undefined;

  for (const role of options.roles) {
    if (role === 'mapper') {
      const r = await attempt(() => client.mapV3({ email_hash: [emailHash] }));
      const item = r.ok ? r.value.email_hash[0] : undefined;
      if (r.ok && item && 'u' in item) rawUid = item.u;
      results.set(
        role,
        r.ok
          ? rawUid
            ? { ok: true, value: 'v3 map of validate@example.com returned a raw UID' }
            : { ok: true, value: 'v3 map answered, without a raw UID' }
          : r,
      );
    } else if (role === 'generator') {
      const r = await attempt(() => client.tokenGenerate({ email_hash: emailHash }));
      if (r.ok && r.value.status === 'success') identity = r.value.identity;
      if (!r.ok) results.set(role, r);
      else if (!identity)
        results.set(role, {
          ok: false,
          failure: {
            kind: 'other',
            message: 'token generate of validate@example.com answered optout, which it never should',
          },
        });
      else {
        const token = identity.advertising_token;
        const v = await attempt(() => client.tokenValidate({ token, email_hash: emailHash }));
        if (!v.ok) results.set(role, v);
        else if (!v.value)
          results.set(role, {
            ok: false,
            failure: {
              kind: 'other',
              message: 'token validate answered false for a token just generated from the same identifier',
            },
          });
        else results.set(role, { ok: true, value: 'token generate and validate of validate@example.com work' });
      }
    } else {
      // Any 44-char string is a valid request; an unknown raw UID just comes back not opted out.
      const ids = [rawUid ?? 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA='];
      const r = await attempt(() => client.optoutStatus(ids));
      results.set(
        role,
        r.ok ? { ok: true, value: `opt-out status of one raw UID answered (${r.value.length} opted out)` } : r,
      );
    }
  }

  const failures = [...results.values()]
    .filter((r): r is { ok: false; failure: Failure } => !r.ok)
    .map((r) => r.failure);
  const anySuccess = [...results.values()].some((r) => r.ok);
  const all401 =
    results.size > 0 && failures.length === results.size && failures.every((f) => f.kind === 'unauthorized');
  const secretWrong = failures.some((f) => f.kind === 'wrong_secret');
  const skewRefused = failures.find((f) => f.kind === 'clock_skew');
  const authRefused = failures.some((f) => f.kind === 'unauthorized');

  // API key
  if (all401) {
    add({
      name: 'API key',
      status: 'fail',
      detail:
        'the service refused the API key on every call (401): the key is wrong, disabled, or for another environment',
      fix: 'check UID2_API_KEY / --api-key-file: integ and prod keys differ, and EUID keys do not work on UID2 (or the reverse)',
    });
  } else {
    add({ name: 'API key', status: 'pass', detail: 'accepted by the service' });
  }

  // client secret
  if (secretWrong) {
    add({
      name: 'client secret',
      status: 'fail',
      detail:
        'the client secret does not match the API key: the service could not decrypt the request (400 Check encryption key (ClientSecret))',
      fix: SECRET_FIX,
    });
  } else if (anySuccess) {
    add({ name: 'client secret', status: 'pass', detail: 'requests and answers decrypt' });
  } else if (skewRefused) {
    // the service decrypts the envelope before it reads the time in it
    add({
      name: 'client secret',
      status: 'pass',
      detail: 'the service decrypted the requests (it then refused their time)',
    });
  } else {
    add({
      name: 'client secret',
      status: 'skip',
      detail: 'not checked: no call got past the checks before decryption',
    });
  }

  // clock skew
  const seen = client.lastServerTime;
  if (skewRefused) {
    add({
      name: 'clock skew',
      status: 'fail',
      detail: `the service rejected the request time (${skewRefused.message}): this machine's clock and the service's differ by more than about 2 minutes`,
      fix: NTP_FIX,
    });
  } else if (seen) {
    const skewMs = seen.localMs - seen.serverMs;
    const text = `this machine's clock is ${(Math.abs(skewMs) / 1000).toFixed(1)} s ${skewMs >= 0 ? 'ahead of' : 'behind'} the service's`;
    const abs = Math.abs(skewMs);
    if (abs > SKEW_FAIL_MS)
      add({
        name: 'clock skew',
        status: 'fail',
        detail: `${text}; the service accepts requests at most 60 s off (the docs' rule)`,
        fix: NTP_FIX,
      });
    else if (abs > SKEW_WARN_MS)
      add({
        name: 'clock skew',
        status: 'warn',
        detail: `${text}; close to the 60 s the service allows`,
        fix: NTP_FIX,
      });
    else add({ name: 'clock skew', status: 'pass', detail: text });
  } else {
    add({
      name: 'clock skew',
      status: 'skip',
      detail: 'not checked: no encrypted answer to read the service time from',
    });
  }

  // roles
  for (const role of options.roles) {
    const r = results.get(role)!;
    const name = ROLE_CHECK[role];
    if (r.ok) add({ name, status: 'pass', detail: r.value });
    else if (r.failure.kind === 'unauthorized') {
      add({
        name,
        status: 'fail',
        detail: `the key lacks the ${ROLE_NAME[role]} role or is wrong (401; ${ROLE_USE[role]})`,
        fix: all401
          ? 'fix the API key first (see above)'
          : `ask your UID2 contact to add the ${ROLE_NAME[role]} role to this key, or leave it out with --roles if you do not need it`,
      });
    } else if (r.failure.kind === 'wrong_secret')
      add({ name, status: 'skip', detail: 'not checked: the client secret does not match the API key' });
    else if (r.failure.kind === 'clock_skew') add({ name, status: 'skip', detail: 'not checked: the clock is off' });
    else
      add({
        name,
        status: 'fail',
        detail: r.failure.message,
        fix: r.failure.kind === 'network' ? 'check the connection to the service' : undefined,
      });
  }

  // refresh: no role needed, but it proves the refresh_response_key round trip
  if (!identity) {
    add({
      name: 'token refresh',
      status: 'skip',
      detail: options.roles.includes('generator')
        ? 'not checked: no identity was generated'
        : 'not checked: needs the generator check',
    });
    return { authRefused };
  }
  try {
    const outcome = await refreshIdentity(client, refreshInputOf(identity));
    if (outcome.kind === 'success')
      add({
        name: 'token refresh',
        status: 'pass',
        detail: 'the new identity decrypted with the refresh_response_key',
      });
    else
      add({
        name: 'token refresh',
        status: 'fail',
        detail: `refreshing a fresh identity answered ${outcome.kind}${'message' in outcome ? `: ${outcome.message}` : ''}`,
      });
  } catch (err) {
    add({ name: 'token refresh', status: 'fail', detail: classifyFailure(err).message });
  }
  return { authRefused };
}

function finish(checks: Check[], authRefused = false): DoctorReport {
  const failed = checks.filter((c) => c.status === 'fail');
  const exitCode = failed.length === 0 ? EXIT.ok : authRefused ? EXIT.auth : EXIT.failed;
  return { ok: failed.length === 0, exitCode, checks };
}

export function formatReport(report: DoctorReport): string {
  const width = Math.max(...report.checks.map((c) => c.name.length));
  const lines = report.checks.map((c) => {
    const head = `  ${c.status.padEnd(4)}  ${c.name.padEnd(width)}  ${c.detail}`;
    return c.fix && c.status !== 'pass' ? `${head}\n  ${''.padEnd(4)}  ${''.padEnd(width)}  fix: ${c.fix}` : head;
  });
  const count = (s: CheckStatus): number => report.checks.filter((c) => c.status === s).length;
  const tally = `${count('fail')} failed, ${count('warn')} warnings, ${count('pass')} passed, ${count('skip')} skipped`;
  return `${lines.join('\n')}\n${report.ok ? 'all checks passed' : 'some checks failed'} (${tally})\n`;
}

/** GET {baseUrl}/ops/healthcheck, for the real command's reachability check. */
export async function probeHealth(baseUrl: string): Promise<Reachability> {
  const start = Date.now();
  try {
    const res = await fetch(`${baseUrl}/ops/healthcheck`, { signal: AbortSignal.timeout(10_000) });
    await res.arrayBuffer();
    return { ok: true, httpStatus: res.status, ms: Date.now() - start };
  } catch (err) {
    const cause = err instanceof Error && err.cause instanceof Error ? err.cause.message : undefined;
    return { ok: false, message: cause ?? (err instanceof Error ? err.message : String(err)) };
  }
}
