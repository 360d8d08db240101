/** How a stop signal ends the CLI process; the exit-code table itself is the runs' (pipeline/run/exit-codes.ts). */
import { EXIT } from '../../pipeline/run/exit-codes.js';

export { EXIT, type ExitCode, UserError } from '../../pipeline/run/exit-codes.js';

/** The signals that stop a run the way Ctrl-C does. */
export const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
export type StopSignal = (typeof STOP_SIGNALS)[number];

/** 129 for SIGHUP (128 + its number, as shells report it); 130 for Ctrl-C and for SIGTERM alike. */
export function exitCodeOfSignal(signal: NodeJS.Signals): number {
  return signal === 'SIGHUP' ? EXIT.hangup : EXIT.interrupted;
}

let firstStopSignal: StopSignal | undefined;

/** The signal that stopped this process's run, if one did; main uses it to pick 129 over 130. */
export function stoppedBy(): StopSignal | undefined {
  return firstStopSignal;
}

/** The part of `process` that onInterrupt needs; a fake in tests. */
export interface InterruptTarget {
  on(signal: StopSignal, listener: (signal: NodeJS.Signals) => void): unknown;
  off(signal: StopSignal, listener: (signal: NodeJS.Signals) => void): unknown;
  exit(code: number): never | void;
  exitCode?: number | string | null | undefined;
  stderr: { write(chunk: string): unknown };
}

/**
 * Ctrl-C, SIGTERM (cron, systemd, docker stop) or SIGHUP (the terminal closed) once: say so, set the exit
 * code (130, or 129 for SIGHUP) and run `handler`, which should stop sending and let the batches in flight
 * commit, so the state stays consistent and a re-run resumes. Twice: exit at once (SQLite transactions keep the
 * state consistent even then). Returns a function that removes the listeners when the command is done.
 */
export function onInterrupt(
  handler: (signal: NodeJS.Signals) => void,
  proc: InterruptTarget = process,
  message = 'interrupted: finishing the requests in flight and saving progress (press Ctrl-C again to stop now)',
): () => void {
  let first: NodeJS.Signals | undefined;
  const listener = (signal: NodeJS.Signals) => {
    if (first !== undefined) {
      proc.exit(exitCodeOfSignal(first));
      return;
    }
    first = signal;
    if (proc === process) firstStopSignal ??= signal as StopSignal;
    proc.exitCode = exitCodeOfSignal(signal);
    proc.stderr.write(`uid2-batch: ${message}\n`);
    try {
      handler(signal);
    } catch {
      proc.exit(exitCodeOfSignal(signal));
    }
  };
  for (const s of STOP_SIGNALS) proc.on(s, listener);
  return () => {
    for (const s of STOP_SIGNALS) proc.off(s, listener);
  };
}
