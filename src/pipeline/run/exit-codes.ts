/** The exit codes a run ends with, and the error that carries one to the user. */
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
