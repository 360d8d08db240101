import { isLoopbackHost } from '../../config/index.js';
import { parseInstantMs } from '../../protocol/index.js';
import { ServiceSetupError, startService, type LocalService, type ServiceOptions } from '../../service/index.js';
import { UserError } from '../shared/exit-codes.js';

/**
 * `uid2-batch serve`: the local identity service as a process. It prints one JSON line when ready
 * ({"url","api_key","client_secret"}) so scripts and other processes can connect, and stops on SIGINT/SIGTERM.
 */

export interface ServeFlags {
  host?: string;
  port?: number;
  apiKey?: string;
  clientSecret?: string;
  seed?: string;
  now?: string;
  scope?: string;
  optoutFile?: string;
  fault429?: number;
  fault500?: number;
  faultDrop?: number;
  latencyMs?: number;
  rateLimit?: number;
  identityLifetime?: number;
  refreshFrom?: number;
  refreshLifetime?: number;
}

/** Flags -> service options, with one clear message per mistake. */
export function serveOptions(flags: ServeFlags): ServiceOptions {
  const options: ServiceOptions = {};
  if (flags.host !== undefined) options.host = flags.host;
  if (flags.port !== undefined) options.port = flags.port;
  if (flags.apiKey !== undefined) options.apiKey = flags.apiKey;
  if (flags.clientSecret !== undefined) options.clientSecret = flags.clientSecret;
  if (flags.seed !== undefined) options.seed = flags.seed;
  if (flags.now !== undefined) {
    const ms = parseInstantMs(flags.now);
    if (ms === null || ms < 0 || ms > Date.UTC(9999, 11, 31)) {
      throw new UserError(
        `--now must be an ISO 8601 date-time (e.g. 2026-01-01T00:00:00Z; no zone means UTC) or Unix seconds (got '${flags.now}')`,
      );
    }
    options.nowMs = ms;
  }
  if (flags.scope !== undefined) {
    const scope = flags.scope.toUpperCase();
    if (scope !== 'UID2' && scope !== 'EUID')
      throw new UserError(`--scope must be uid2 or euid (got '${flags.scope}')`);
    options.scope = scope;
  }
  if (flags.optoutFile !== undefined) options.optoutFile = flags.optoutFile;
  const faults: NonNullable<ServiceOptions['faults']> = {};
  if (flags.fault429 !== undefined) faults.p429 = flags.fault429;
  if (flags.fault500 !== undefined) faults.p500 = flags.fault500;
  if (flags.faultDrop !== undefined) faults.pDrop = flags.faultDrop;
  if (flags.latencyMs !== undefined) faults.latencyMs = flags.latencyMs;
  if (flags.rateLimit !== undefined) faults.rateLimitItemsPerS = flags.rateLimit;
  if ((faults.p429 ?? 0) + (faults.p500 ?? 0) + (faults.pDrop ?? 0) > 1) {
    throw new UserError(
      '--fault-429, --fault-500 and --fault-drop are probabilities of one draw per request: together they must not exceed 1',
    );
  }
  options.faults = faults;
  const lifetimes: NonNullable<ServiceOptions['lifetimes']> = {};
  if (flags.identityLifetime !== undefined) lifetimes.identityExpiresS = flags.identityLifetime;
  if (flags.refreshFrom !== undefined) lifetimes.refreshFromS = flags.refreshFrom;
  if (flags.refreshLifetime !== undefined) lifetimes.refreshExpiresS = flags.refreshLifetime;
  options.lifetimes = lifetimes;
  return options;
}

export interface ServeIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  /** Resolves when the service should stop (SIGINT/SIGTERM for the real command). */
  stopSignal: Promise<unknown>;
}

/** The warning for a listening address other machines can reach, or null on loopback. */
export function exposureWarning(host: string | undefined): string | null {
  if (host === undefined || isLoopbackHost(host)) return null;
  return `uid2-batch serve: warning: listening on ${host}, not loopback: other machines can reach this test service and its /_local/ controls, which need no key\n`;
}

export async function runServe(flags: ServeFlags, io: ServeIo): Promise<void> {
  const options = serveOptions(flags);
  const warning = exposureWarning(options.host);
  if (warning !== null) io.stderr.write(warning);
  let service: LocalService;
  try {
    service = await startService(options);
  } catch (err) {
    throw toUserError(err, options);
  }
  io.stdout.write(
    `${JSON.stringify({ url: service.url, api_key: service.apiKey, client_secret: service.clientSecret })}\n`,
  );
  await io.stopSignal;
  await service.close();
}

function toUserError(err: unknown, options: ServiceOptions): Error {
  if (err instanceof ServiceSetupError) return new UserError(err.message);
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  const where = `${options.host ?? '127.0.0.1'}:${options.port ?? 0}`;
  if (code === 'EADDRINUSE')
    return new UserError(`cannot listen on ${where}: the port is in use; pick another --port, or 0 for a free one`);
  if (code === 'EACCES')
    return new UserError(`cannot listen on ${where}: permission denied; use a port above 1023, or 0 for a free one`);
  if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND')
    return new UserError(`cannot listen on ${where}: no such local address; check --host`);
  return err instanceof Error ? err : new Error(String(err));
}

/** Resolves with the first SIGINT or SIGTERM: the real command's stop signal. */
export function stopOnSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const stop = (signal: NodeJS.Signals) => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      resolve(signal);
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
}
