/** The exit-code contract (DESIGN.md "Errors and exit codes"); documented in the README. */
export const EXIT = {
  ok: 0,
  failed: 1,
  usage: 2,
  /** Finished, but some rows ended in `error`. */
  partial: 3,
  /** The service refused the credentials (401). */
  auth: 4,
  interrupted: 130,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** An error meant for the user: one clear message, no stack trace, and the exit code to end with. */
export class UserError extends Error {
  constructor(
    message: string,
    readonly exitCode: ExitCode = EXIT.usage,
  ) {
    super(message);
    this.name = 'UserError';
  }
}

/** The part of `process` that onInterrupt needs; a fake in tests. */
export interface InterruptTarget {
  on(signal: 'SIGINT' | 'SIGTERM', listener: (signal: NodeJS.Signals) => void): unknown;
  off(signal: 'SIGINT' | 'SIGTERM', listener: (signal: NodeJS.Signals) => void): unknown;
  exit(code: number): never | void;
  exitCode?: number | string | null | undefined;
  stderr: { write(chunk: string): unknown };
}

/**
 * Ctrl-C (or SIGTERM from cron/systemd) once: say so, set exit code 130 and run `handler`, which should stop
 * sending and let the batches in flight commit, so the state stays consistent and a re-run resumes. Twice:
 * exit 130 at once (SQLite transactions keep the state consistent even then). Returns a function that removes
 * the listeners when the command is done.
 */
export function onInterrupt(
  handler: (signal: NodeJS.Signals) => void,
  proc: InterruptTarget = process,
  message = 'interrupted: finishing the requests in flight and saving progress (press Ctrl-C again to stop now)',
): () => void {
  let count = 0;
  const listener = (signal: NodeJS.Signals) => {
    count += 1;
    if (count > 1) {
      proc.exit(EXIT.interrupted);
      return;
    }
    proc.exitCode = EXIT.interrupted;
    proc.stderr.write(`uid2-batch: ${message}\n`);
    try {
      handler(signal);
    } catch {
      proc.exit(EXIT.interrupted);
    }
  };
  proc.on('SIGINT', listener);
  proc.on('SIGTERM', listener);
  return () => {
    proc.off('SIGINT', listener);
    proc.off('SIGTERM', listener);
  };
}
