/**
 * The one exit-code table of every command (docs/architecture.md §5; the README's table says the same). Rows
 * that are invalid or opted out are data (0); a code above 4 is about the one identity or token a token command
 * was given.
 */
export const EXIT = {
  ok: 0,
  /** Failed: the service, the network, a bad input file; `token validate`: the token is not the identifier's (false). */
  failed: 1,
  /** Usage or configuration: nothing was done. */
  usage: 2,
  /** Finished, but some rows ended in `error`: running again completes them. */
  partial: 3,
  /** The service refused the credentials (401). */
  auth: 4,
  /** The one identity given opted out (token generate, token refresh). */
  optout: 5,
  /** The token given is not one the service accepts or can read (token refresh, token validate). */
  invalidToken: 6,
  /** Finished, but records that could not be read were skipped (--on-bad-row skip); running again does not change it. */
  skipped: 9,
  /** The refresh token has expired (token refresh). */
  expiredToken: 7,
  /** The service refused the refresh token without saying why, as it answers callers without an API key. */
  refreshError: 8,
  /** SIGINT (Ctrl-C) or SIGTERM (cron, systemd, docker stop). */
  interrupted: 130,
  /** SIGHUP: the terminal closed (an ssh session dropped). */
  hangup: 129,
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
