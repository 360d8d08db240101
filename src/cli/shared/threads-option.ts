/** `--threads N`: the user's choice, handed to the run's planner (pipeline/run/run-plan.ts), which decides. */
import type { Command } from 'commander';
import { wholeNumber } from './options.js';

const parseThreads = wholeNumber('--threads', 0, 64);

export function addThreadsOption(cmd: Command, defaultValue: number, rule: string): Command {
  return cmd.option(
    '--threads <n>',
    `worker threads that parse, hash and encode rows (default: ${rule} = ${defaultValue}, none for local files under 1 MB; 0: all on the main thread; the output is the same)`,
    parseThreads,
  );
}

/** The --threads value commander parsed, or 'auto': the planner's default for the machine. */
export function threadsFlag(opts: Record<string, unknown>): number | 'auto' {
  return typeof opts.threads === 'number' ? opts.threads : 'auto';
}
