import { availableParallelism } from 'node:os';
import type { Command } from 'commander';
import { wholeNumber } from './options.js';

/**
 * `--threads N`: worker threads that encode the output. Measured on an idle 2-core machine (bench/run.mjs
 * --threads 0,1): `hash`, all CPU and nothing else to wait for, runs 1.4x faster with one thread, so it defaults
 * to cores - 1. `map` gains 1-11% (it waits on the service, and here the local service shares the cores) for
 * about 70 MB more peak RSS, so it defaults to none; give it --threads 1 when the service is remote and a core idles.
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
