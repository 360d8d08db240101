import { availableParallelism } from 'node:os';
import type { Command } from 'commander';
import { wholeNumber } from './options.js';

/**
 * `--threads N`: worker threads that encode the output. For `map` the default leaves one core to the main
 * thread (reading, preparing, mapping) and gives the others to encoding, at least one thread: measured 1.25x
 * rows/s on 2 cores. `hash` defaults to none: its pipeline is all CPU, and packing rows for a thread costs about
 * a quarter more CPU in all, which only pays when a core is really free (bench/run.mjs --threads 0,1 shows it).
 */
export function defaultThreads(cores = availableParallelism()): number {
  return Math.max(1, cores - 1);
}

const parseThreads = wholeNumber('--threads', 0, 64);

export function addThreadsOption(cmd: Command, defaultValue: number): Command {
  const otherwise = defaultValue === 0 ? 'default 0: all on the main thread' : `default: cores - 1 = ${defaultValue}; 0: all on the main thread`;
  return cmd.option('--threads <n>', `worker threads that encode the output (${otherwise}; the output is the same)`, parseThreads);
}

/** The --threads value commander parsed, or the default. */
export function threadsFlag(opts: Record<string, unknown>, defaultValue: number): number {
  return typeof opts.threads === 'number' ? opts.threads : defaultValue;
}
