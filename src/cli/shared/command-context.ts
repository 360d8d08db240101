/**
 * What the commands that run against the service share before their run: the injected dependencies, the
 * configuration, and the service target (with the embedded service for --env local) the run connects to.
 */
import {
  attachLocalService,
  envFingerprint,
  resolveConfig,
  stateSetting,
  type ConnectionFlags,
  type ResolvedConfig,
} from '../../config/index.js';
import type { ServiceTarget } from '../../pipeline/run/connection.js';
import type { InputRunDeps, RunDeps } from '../../pipeline/run/run-deps.js';
import { startEmbeddedService, type EmbeddedServiceStarter } from './embedded-service.js';
import { onInterrupt } from './exit-codes.js';
import { boundHeapGrowth } from '../../pipeline/run/heap-growth.js';
import { createProgress, loadSpinner } from './progress.js';

export { sayTo, type Say } from '../../pipeline/run/run-deps.js';

/** What a command touches besides its files: injected, so tests run the command without a process. */
export interface CommandDeps extends RunDeps {
  resolveConfig?(flags: ConnectionFlags, require: CredentialsNeeded): ResolvedConfig;
}

/** A command that may read its input from stdin. */
export interface InputCommandDeps extends CommandDeps, InputRunDeps {}

export interface CredentialsNeeded {
  apiKey: boolean;
  clientSecret: boolean;
}

/**
 * Runs a command against this process's streams, env and clock, with Ctrl-C wired to its signal for the time
 * it runs; the command's exit code becomes the process's. A batch run: the heap's growth is bounded first.
 */
export async function runInProcess(
  run: (deps: InputCommandDeps) => Promise<number>,
  interruptMessage?: string,
): Promise<void> {
  boundHeapGrowth();
  await loadSpinner(process.stderr);
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

/**
 * The state a command that keeps one (map, remap-due) uses: --state, else UID2_BATCH_STATE, else the profile's
 * `state`; undefined when none is set.
 */
export function stateFor(
  connection: ConnectionFlags,
  state: string | undefined,
  deps: CommandDeps,
): string | undefined {
  return state ?? stateSetting(connection, deps.env)?.value;
}

/** The configuration by the shared rules (flag > env var > profile), or the one a test injects. */
export function resolveFor(flags: ConnectionFlags, deps: CommandDeps, require: CredentialsNeeded): ResolvedConfig {
  return deps.resolveConfig !== undefined
    ? deps.resolveConfig(flags, require)
    : resolveConfig(flags, deps.env, {}, { require });
}

/** The run's deps: the command's, with the CLI's progress display (spinner or lines on stderr). */
export function runDepsOf<D extends RunDeps>(deps: D): D {
  if (deps.startProgress !== undefined) return deps;
  return {
    ...deps,
    startProgress: (request) =>
      createProgress({
        ...request,
        stream: deps.stderr,
        env: deps.env,
        stdoutIsTTY: deps.stdout.isTTY === true,
      }),
  };
}

/**
 * Where a run sends its requests: the resolved configuration; for --env local, the embedded service, started
 * when the run connects (by `startLocal`, which tests may replace).
 */
export function serviceTargetOf(
  config: ResolvedConfig,
  startLocal: EmbeddedServiceStarter = startEmbeddedService,
): ServiceTarget {
  const target = targetOf(config);
  if (!config.isLocal) return target;
  return {
    ...target,
    start: async () => {
      const service = await startLocal(config.env.scope);
      return { target: targetOf(attachLocalService(config, service)), close: () => service.close() };
    },
  };
}

function targetOf(config: ResolvedConfig): ServiceTarget {
  return {
    baseUrl: config.env.baseUrl,
    apiKey: config.apiKey,
    clientSecret: config.clientSecret,
    timeoutMs: config.timeoutMs,
    maxAttempts: config.maxAttempts,
    proxy: config.proxy,
    isPublic: config.env.isPublic,
    envFingerprint: envFingerprint(config),
    envName: config.env.name,
    isLocal: config.isLocal,
  };
}
