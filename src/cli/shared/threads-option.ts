import { availableParallelism } from 'node:os';
import type { Command } from 'commander';
import { wholeNumber } from './options.js';

/**
 * `--threads N`: worker threads that parse a CSV input, normalize and hash its identifiers, and encode the
 * output (for JSONL input: only encode the output). The defaults follow what `npm run bench -- --threads
 * 0,1,2,3` prints per setting (rows/s, peak RSS, CPU of the process and of its main thread; see npm run bench):
 *
 * - `map` keeps the main thread busy with batching, HTTP, encryption and the state file, so it takes
 *   cores - 1 threads. Past 3 the main thread, not the threads, is the bound, so more only cost memory.
 * - `hash` leaves the main thread only reading and writing, a fraction of what a thread does per row, so it
 *   takes one thread per core, up to 4.
 *
 * Each thread costs tens of MB. 0 runs everything on the main thread; the output is the same bytes whatever N.
 */
export function defaultMapThreads(cores = availableParallelism()): number {
  return Math.min(3, Math.max(1, cores - 1));
}

export function defaultHashThreads(cores = availableParallelism()): number {
  return Math.min(4, Math.max(1, cores));
}

const parseThreads = wholeNumber('--threads', 0, 64);

export function addThreadsOption(cmd: Command, defaultValue: number, rule: string): Command {
  return cmd.option(
    '--threads <n>',
    `worker threads that parse, hash and encode rows (default: ${rule} = ${defaultValue}; 0: all on the main thread; the output is the same)`,
    parseThreads,
  );
}

/** The --threads value commander parsed, or the default. */
export function threadsFlag(opts: Record<string, unknown>, defaultValue: number): number {
  return typeof opts.threads === 'number' ? opts.threads : defaultValue;
}
