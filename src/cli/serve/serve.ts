import type { Command } from 'commander';
import { isLoopbackHost } from '../../config/index.js';
import { parseInstantMs } from '../../protocol/index.js';
import { ServiceSetupError, startService, type LocalService, type ServiceOptions } from '../../service/index.js';
import { EXIT, UserError } from '../shared/exit-codes.js';
import { decimalNumber, wholeNumber } from '../shared/options.js';

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

const TEN_YEARS_S = 10 * 366 * 86_400;

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

function stopOnSignal(): Promise<NodeJS.Signals> {
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

const probability = (flag: string) => decimalNumber(flag, 0, 1);
const seconds = (flag: string) => wholeNumber(flag, 1, TEN_YEARS_S);

export function registerServe(program: Command): void {
  program
    .command('serve')
    .summary('run the local identity service (a faithful stand-in for the UID2/EUID operator, for tests and demos)')
    .description(
      [
        'Runs the local identity service, a faithful stand-in for the UID2/EUID operator for tests and demos. Prints {"url","api_key","client_secret"} on one line when ready; stops on Ctrl-C (SIGINT) or SIGTERM.',
        'Two clocks. Identity time decides salt buckets and their rotation, r and p, token lifetimes and expiry, opt-out times, the buckets endpoint and now_ms in /_local/stats. It starts at --now (default: the real time), runs at real speed, and jumps with POST /_local/clock {"advance_days": N} or {"set": "2026-01-01T00:00:00Z"}.',
        'Envelope time is what request timestamps must be within 2 minutes of, and what answers carry: the real time plus the distance of --now from the real time at start. POST /_local/clock never moves it, and neither does it move the CLI\'s own clock: remap-due picks what is due by its own now. So to run the nightly remap over simulated days, move both: POST /_local/clock {"advance_days": 30} for the service, and remap-due --now <the same simulated time> for the CLI (remap-due with nothing due says when the next entries come due). `serve --now <10 minutes from now>` behaves like an operator whose clock is 10 minutes off (every request refused for clock skew). To start at a given identity date without that skew, start without --now and POST {"set": ...}.',
      ].join('\n\n'),
    )
    .option(
      '--host <host>',
      'interface to listen on (default 127.0.0.1; anything else is reachable from other machines)',
    )
    .option('--port <port>', 'port (default 0 = a free port, see the printed url)', wholeNumber('--port', 0, 65535))
    .option('--api-key <key>', 'API key to accept (default: a fresh random key, printed)')
    .option('--client-secret <secret>', 'client secret, base64 of 32 bytes (default: fresh random, printed)')
    .option(
      '--seed <text>',
      'seed of every salt, bucket and token key: same seed, same raw UIDs (default uid2-batch-local)',
    )
    .option(
      '--now <time>',
      'identity time at start: ISO 8601 (no zone = UTC) or Unix seconds (default: now); also skews the envelope clock by as much, see above',
    )
    .option('--scope <scope>', 'uid2 (default) or euid')
    .option(
      '--optout-file <csv>',
      'CSV of opt-outs with a header of email, phone, email_hash, phone_hash, advertising_id, since_ms',
    )
    .option('--fault-429 <p>', 'probability of a bare 429 per API request', probability('--fault-429'))
    .option('--fault-500 <p>', 'probability of a 500 per API request', probability('--fault-500'))
    .option('--fault-drop <p>', 'probability of closing the connection without an answer', probability('--fault-drop'))
    .option('--latency-ms <ms>', 'delay before every API answer', wholeNumber('--latency-ms', 0, 600_000))
    .option(
      '--rate-limit <items>',
      'identity-map items admitted per second; above it a bare 429',
      wholeNumber('--rate-limit', 1, 1_000_000_000),
    )
    .option(
      '--identity-lifetime <s>',
      'advertising token lifetime, seconds (default 3600)',
      seconds('--identity-lifetime'),
    )
    .option('--refresh-from <s>', 'refresh_from after generation, seconds (default 900)', seconds('--refresh-from'))
    .option('--refresh-lifetime <s>', 'refresh token lifetime, seconds (default 86400)', seconds('--refresh-lifetime'))
    .action(async (flags: ServeFlags) => {
      await runServe(flags, { stdout: process.stdout, stderr: process.stderr, stopSignal: stopOnSignal() });
      process.exitCode = EXIT.ok;
    });
}
