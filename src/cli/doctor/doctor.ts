import { credentialsForDisplay, type ResolvedConfig } from '../../config/index.js';
import { checkService, ROLE_CHECK, type Check, type CheckStatus } from '../../pipeline/jobs/service-checks.js';
import { proxyLine, type ServiceClient } from '../../pipeline/run/connection.js';
import { EXIT } from '../shared/exit-codes.js';
import type { Role } from './doctor-roles.js';

export type { Check } from '../../pipeline/jobs/service-checks.js';
export { parseRoles, ROLES, type Role } from './doctor-roles.js';

/**
 * `doctor`: can this machine, with this configuration, use the service? Each check says pass / warn / fail / skip
 * and, when it fails, how to fix it. Secrets are never printed: only where each one came from.
 */

export interface DoctorReport {
  ok: boolean;
  exitCode: number;
  checks: Check[];
}

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
