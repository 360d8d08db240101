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
