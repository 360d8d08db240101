import { availableParallelism } from 'node:os';
import type { Command } from 'commander';
import { wholeNumber } from './options.js';

/**
 * `--threads N`: worker threads for the CPU-bound output encoding. Default: one core is left to the main
 * thread (reading, preparing, mapping), the others encode; at least one thread.
 */
export function defaultThreads(cores = availableParallelism()): number {
  return Math.max(1, cores - 1);
}

const parseThreads = wholeNumber('--threads', 0, 64);

export function addThreadsOption(cmd: Command): Command {
  return cmd.option('--threads <n>', `worker threads that encode the output (default: cores - 1 = ${defaultThreads()}; 0: none, all on the main thread; the output is the same)`, parseThreads);
}

/** The --threads value commander parsed, or the default. */
export function threadsFlag(opts: Record<string, unknown>): number {
  return typeof opts.threads === 'number' ? opts.threads : defaultThreads();
}
