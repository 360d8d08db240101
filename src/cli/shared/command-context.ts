import { createServiceClient, type ClientOptions, type ServiceClient } from '../../client/index.js';
import { resolveConfig, type ConnectionFlags, type ResolvedConfig } from '../../config/index.js';
import { AdaptiveConcurrency } from '../../pipeline/run/adaptive-limiter.js';
import { onInterrupt } from './exit-codes.js';
import { startEmbeddedServiceIfLocal } from './embedded-service.js';
import { boundHeapGrowth } from './heap-growth.js';
import type { OutputFlags } from './options.js';

/**
 * What the commands that run against the service share before and around their own work: the injected
 * dependencies, the configuration, the connection (with the embedded service for --env local) and the
 * choice of concurrency.
 */

/** What a command touches besides its files: injected, so tests run the command without a process. */
export interface CommandDeps {
  stdout: NodeJS.WritableStream & { isTTY?: boolean };
  stderr: NodeJS.WritableStream & { isTTY?: boolean };
  env: NodeJS.ProcessEnv;
  /** Local clock, Unix ms. */
  now(): number;
  /** Ctrl-C: stop sending, let the requests in flight finish and commit. */
  signal?: AbortSignal;
  resolveConfig?(flags: ConnectionFlags, require: CredentialsNeeded): ResolvedConfig;
}

/** A command that may read its input from stdin. */
export interface InputCommandDeps extends CommandDeps {
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
}

export interface CredentialsNeeded {
  apiKey: boolean;
  clientSecret: boolean;
}

/** A line for the user on stderr, unless --quiet. */
export type Say = (line: string) => void;

/**
 * Runs a command against this process's streams, env and clock, with Ctrl-C wired to its signal for the time
 * it runs; the command's exit code becomes the process's. A batch run: the heap's growth is bounded first.
 */
export async function runInProcess(
  run: (deps: InputCommandDeps) => Promise<number>,
  interruptMessage?: string,
): Promise<void> {
  boundHeapGrowth();
  const stop = new AbortController();
  const removeInterruptHandler =
    interruptMessage === undefined
      ? onInterrupt(() => stop.abort())
      : onInterrupt(() => stop.abort(), process, interruptMessage);
  try {
    process.exitCode = await run({
      stdin: process.stdin,
      stdout: process.stdout,
      stderr: process.stderr,
      env: process.env,
      now: () => Date.now(),
      signal: stop.signal,
    });
  } finally {
    removeInterruptHandler();
  }
}

/** The configuration by the shared rules (flag > env var > profile), or the one a test injects. */
export function resolveFor(flags: ConnectionFlags, deps: CommandDeps, require: CredentialsNeeded): ResolvedConfig {
  return deps.resolveConfig !== undefined
    ? deps.resolveConfig(flags, require)
    : resolveConfig(flags, deps.env, {}, { require });
}

export function sayTo(output: OutputFlags, deps: Pick<CommandDeps, 'stderr'>): Say {
  return (line) => {
    if (!output.quiet) deps.stderr.write(`uid2-batch: ${line}\n`);
  };
}

/** A client for the resolved environment; for --env local the embedded service runs until close(). */
export interface ServiceConnection {
  /** The config the client uses: for --env local, pointed at the embedded service. */
  config: ResolvedConfig;
  client: ServiceClient;
  close(): Promise<void>;
}

/** What a connection may be tuned with; `client` is a test's own client (not closed here). */
export type ConnectionTuning = Pick<ClientOptions, 'connections' | 'onRetry' | 'maxAttempts'> & {
  client?: ServiceClient;
};

/** Starts the embedded service for --env local, then a client for the config's service (the CLI's one builder). */
export async function connect(resolved: ResolvedConfig, tuning: ConnectionTuning = {}): Promise<ServiceConnection> {
  const embedded = await startEmbeddedServiceIfLocal(resolved);
  const config = embedded.config;
  const { client: injected, ...clientTuning } = tuning;
  const client =
    injected ??
    createServiceClient({
      baseUrl: config.env.baseUrl,
      ...(config.apiKey !== undefined ? { apiKey: config.apiKey } : {}),
      ...(config.clientSecret !== undefined ? { clientSecret: config.clientSecret } : {}),
      ...(config.timeoutMs !== undefined ? { requestTimeoutMs: config.timeoutMs } : {}),
      ...(config.proxy !== undefined ? { proxy: config.proxy } : {}),
      ...(config.maxAttempts !== undefined ? { maxAttempts: config.maxAttempts } : {}),
      ...clientTuning,
    });
  return {
    config,
    client,
    close: async () => {
      if (injected === undefined) await client.close();
      await embedded.close();
    },
  };
}

/** The public service allows 20 map requests in flight; a private operator or the local service may take more. */
export const PUBLIC_MAX_CONCURRENCY = 20;

export function chooseConcurrency(requested: number | undefined, config: ResolvedConfig, say: Say): number {
  const wanted = requested ?? PUBLIC_MAX_CONCURRENCY;
  if (config.env.isPublic && wanted > PUBLIC_MAX_CONCURRENCY) {
    say(
      `--concurrency ${wanted} lowered to ${PUBLIC_MAX_CONCURRENCY}: the public service allows ${PUBLIC_MAX_CONCURRENCY} map requests in flight ` +
        '(a private operator or --base-url allows more)',
    );
    return PUBLIC_MAX_CONCURRENCY;
  }
  return wanted;
}

/** A connection for map requests: one socket per request in flight, and a 429 lowers the concurrency for a while. */
export interface MapConnection extends ServiceConnection {
  limiter: AdaptiveConcurrency;
}

export async function connectForMapping(
  resolved: ResolvedConfig,
  concurrency: number,
  tuning: Pick<ConnectionTuning, 'maxAttempts' | 'client'> = {},
): Promise<MapConnection> {
  const limiter = new AdaptiveConcurrency({ max: concurrency });
  const connection = await connect(resolved, { connections: concurrency, onRetry: limiter.onRetry, ...tuning });
  return { ...connection, limiter };
}
