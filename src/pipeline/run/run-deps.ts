/** What a run touches besides its files: injected, so that tests run a command's work without a process. */
import type { ServiceClient } from './connection.js';
import type { OutputFlags } from './output-options.js';

/** What a run pushes to its progress display; every field is a running total. */
export interface ProgressCounters {
  done: number;
  total?: number;
  /** The total is a guess (e.g. from the file size), so it is shown with `~` and dropped once passed. */
  totalIsEstimate?: boolean;
  retries?: number;
  http429?: number;
}

/** The progress display of one run. */
export interface RunProgress {
  update(counters: Partial<ProgressCounters>): void;
  stop(): void;
}

/** How a run asks for its progress display: `quiet` keeps it silent; `dataOnStdout` keeps it off stdout's terminal. */
export interface ProgressRequest {
  label: string;
  quiet: boolean;
  dataOnStdout: boolean;
}

export interface RunDeps {
  stdout: NodeJS.WritableStream & { isTTY?: boolean };
  stderr: NodeJS.WritableStream & { isTTY?: boolean };
  env: NodeJS.ProcessEnv;
  /** Local clock, Unix ms. */
  now(): number;
  /** Ctrl-C: stop sending, let the requests in flight finish and commit. */
  signal?: AbortSignal | undefined;
  /** The progress display (the CLI's spinner or lines); absent: none. */
  startProgress?: ((request: ProgressRequest) => RunProgress) | undefined;
  /** For tests: a client instead of one made from the target (its onRetry cannot be wired to the limiter). */
  client?: ServiceClient | undefined;
}

/** A run that may read its input from stdin. */
export interface InputRunDeps extends RunDeps {
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
}

/** A line for the user on stderr, unless --quiet. */
export type Say = (line: string) => void;

/** The lines of a run for the user: on stderr, each with the program's name, none with --quiet. */
export function sayTo(output: OutputFlags, deps: Pick<RunDeps, 'stderr'>): Say {
  return (line) => {
    if (!output.quiet) deps.stderr.write(`uid2-batch: ${line}\n`);
  };
}

const NO_PROGRESS: RunProgress = { update: () => undefined, stop: () => undefined };

/** The run's progress display, or none when the deps give no way to show one. */
export function startProgress(deps: Pick<RunDeps, 'startProgress'>, request: ProgressRequest): RunProgress {
  return deps.startProgress?.(request) ?? NO_PROGRESS;
}
