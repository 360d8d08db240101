import { classifyFailure, type Failure, type IdentifierKind } from '../../pipeline/tokens/tokens.js';
import type { ServiceConnection } from '../../pipeline/run/connection.js';
import type { CredentialsNeeded } from '../shared/command-context.js';
import { EXIT, UserError, type ExitCode } from '../shared/exit-codes.js';
import { readAll, stripLineEnding } from './token-files.js';

/** What a token command touches besides the service: injected so tests call the commands directly. */
export interface TokenIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  /** Local clock, Unix ms. */
  now(): number;
}

export function processIo(): TokenIo {
  return { stdout: process.stdout, stderr: process.stderr, stdin: process.stdin, now: () => Date.now() };
}

/** A client for the resolved environment; for --env local the embedded service runs until close(). */
export type Connection = ServiceConnection;

/** Opens a connection; refresh needs no credentials, every other token call needs both. */
export type Connect = (require: CredentialsNeeded) => Promise<Connection>;

export async function withConnection<T>(
  connect: Connect,
  require: CredentialsNeeded,
  work: (c: Connection) => Promise<T>,
): Promise<T> {
  const connection = await connect(require);
  try {
    return await work(connection);
  } finally {
    await connection.close();
  }
}

export function note(io: TokenIo, text: string): void {
  io.stderr.write(`uid2-batch: ${text}\n`);
}

// ---------------------------------------------------------------------------------------------------------------

/** The four identifier flags as commander names them. */
export interface IdentifierFlags {
  email?: string;
  phone?: string;
  emailHash?: string;
  phoneHash?: string;
}

const FLAG_OF: Record<IdentifierKind, string> = {
  email: '--email',
  phone: '--phone',
  email_hash: '--email-hash',
  phone_hash: '--phone-hash',
};

export function flagOf(kind: IdentifierKind): string {
  return FLAG_OF[kind];
}

/** Exactly one identifier flag; undefined when none is given (the caller decides whether that is an error). */
export function pickIdentifier(flags: IdentifierFlags): { kind: IdentifierKind; value: string } | undefined {
  const given = (
    [
      ['email', flags.email],
      ['phone', flags.phone],
      ['email_hash', flags.emailHash],
      ['phone_hash', flags.phoneHash],
    ] as const
  ).filter((g): g is readonly [IdentifierKind, string] => g[1] !== undefined);
  if (given.length > 1) {
    throw new UserError(`give one identifier, not ${given.map(([k]) => FLAG_OF[k]).join(' and ')}`);
  }
  const first = given[0];
  return first ? { kind: first[0], value: first[1] } : undefined;
}

/** `--email -` reads the value from stdin, so the address stays out of shell history and `ps`. */
export async function identifierValue(kind: IdentifierKind, value: string, io: TokenIo): Promise<string> {
  if (value !== '-') return value;
  if (io.stdin.isTTY) note(io, `reading the ${kind.replace('_', ' ')} from stdin (end with Enter, then Ctrl-D)`);
  return stripLineEnding(await readAll(io.stdin));
}

// ---------------------------------------------------------------------------------------------------------------

/** What a user should do about a failed encrypted call. `role` names the role the endpoint needs. */
export function failureAdvice(failure: Failure, role: string): { message: string; exitCode: ExitCode } {
  switch (failure.kind) {
    case 'unauthorized':
      return {
        message: `the service refused the API key (401): the key lacks the ${role} role or is wrong (or disabled)`,
        exitCode: EXIT.auth,
      };
    case 'wrong_secret':
      return {
        message:
          'the client secret does not match the API key: the service could not decrypt the request (400 Check encryption key (ClientSecret)); use the secret issued with this key',
        exitCode: EXIT.usage,
      };
    case 'clock_skew':
      return {
        message: `clock skew: the service rejected the request time (${failure.message}); set this machine's clock right (NTP) and try again`,
        exitCode: EXIT.failed,
      };
    case 'client_error':
      return { message: `the service refused the request (400): ${failure.message}`, exitCode: EXIT.failed };
    default:
      return { message: failure.message, exitCode: EXIT.failed };
  }
}

/** Turns a failed call into a UserError with advice; errors that are already UserErrors pass through. */
/** For a --tcf-consent-string the service cannot read, one generate or a whole batch. */
export const UNREADABLE_CONSENT_FLAG =
  '--tcf-consent-string: the service cannot read it (User consent is invalid); give the TCF consent string ' +
  'exactly as the consent platform wrote it (the euconsent-v2 value)';

export function adviseFailure(err: unknown, role: string): never {
  if (err instanceof UserError) throw err;
  const { message, exitCode } = failureAdvice(classifyFailure(err), role);
  throw new UserError(message, exitCode);
}
