import { availableParallelism } from 'node:os';
import type { Command } from 'commander';
import { wholeNumber } from './options.js';

/**
 * `--threads N`: worker threads that parse a CSV input, normalize and hash its identifiers, and encode the
 * output (for JSONL input: only encode the output). Measured with `npm run bench` on a 2-core machine (README):
 *
 * - `map` keeps the main thread busy with batching, HTTP, encryption and the state file, so it takes
 *   cores - 1 threads: one on 2 cores, where it ran 1M mixed rows about 1.6x faster than with none. Past 3 the
 *   main thread is the bound (about 3 s of CPU per 1M rows against 6.5 s in a thread), so more only cost memory.
 * - `hash` leaves the main thread only reading and writing (about 0.5 s of CPU per 1M rows against 2 s in a
 *   thread), so it takes one thread per core, up to 4: two on 2 cores, 1.8x the rate of none.
 *
 * Each thread costs 30 to 60 MB. 0 runs everything on the main thread; the output is the same bytes whatever N.
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
