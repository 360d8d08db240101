import { availableParallelism } from 'node:os';
import type { Command } from 'commander';
import { wholeNumber } from './options.js';

/**
 * `--threads N`: worker threads that parse a CSV input, normalize and hash its identifiers, and encode the
 * output (for JSONL input: only encode the output). Measured with `npm run bench` on a 2-core machine (README):
 *
 * - `map` keeps the main thread busy with batching, HTTP, encryption and the state file, so it takes
 *   cores - 1 threads: one on 2 cores, where it ran 1M mixed rows about 1.5x faster than with none.
 * - `hash` leaves the main thread only reading and writing (about 0.6 s of CPU per 1M rows), so it takes one
 *   thread per core: two on 2 cores, about 1.3x the rate of one thread.
 *
 * 0 runs everything on the main thread; the output is the same bytes whatever the number.
 */
export function defaultMapThreads(cores = availableParallelism()): number {
  return Math.max(1, cores - 1);
}

export function defaultHashThreads(cores = availableParallelism()): number {
  return Math.max(1, cores);
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
