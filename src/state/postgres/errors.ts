/** What a PostgreSQL state's connection faults become: one line each (what, where, how to fix) as a StateError. */
import { StateError, StateLockedError } from '../errors.js';

/**
 * The server could not be reached or refused us (exit 2: the URL, the server or its users need fixing), or the
 * connection was lost during a run (exit 1: what was committed stays, a re-run resumes).
 */
export class StateConnectionError extends StateError {
  readonly userMessage: string;
  constructor(
    where: string,
    message: string,
    readonly exitCode: number,
  ) {
    super(message, where);
    this.userMessage = message;
  }
}

/** A sweep's share of a database state held by another run's advisory lock. */
export class StateShareLockedError extends StateLockedError {
  constructor(where: string, share: string) {
    super(where, share, null, null);
    // the CLI knows this refusal by the name of the class it extends
    this.name = 'StateLockedError';
    this.message = `another uid2-batch run is doing ${share} of ${where}; wait for it to finish, or run another shard`;
  }
}

/** A sweep's shard refused while runners of the same command split the state into another number of shares. */
export class StateShareCountError extends StateLockedError {
  constructor(where: string, command: string, count: number, heldCount: number) {
    super(where, command, null, null);
    this.name = 'StateLockedError';
    this.message =
      `${command} --shard K/${count} cannot run while runners of ${command} --shard K/${heldCount} hold ${where} ` +
      `(shares of different counts overlap); wait for those runners to finish, or use --shard K/${heldCount}`;
  }
}

// PostgreSQL's error codes (SQLSTATE) and the driver's own codes of a connection that went away
const BAD_PASSWORD = new Set(['28P01', '28000']);
const NO_DATABASE = '3D000';
// too many sessions: the server's max_connections, or the user's or the database's connection limit
const NO_ROOM = '53300';
const UNREACHABLE = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'CONNECT_TIMEOUT',
]);
const LOST = new Set([
  'ECONNRESET',
  'EPIPE',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  '57P01',
  '57P02',
  '57P03',
]);

/** The code of a driver or socket error: PostgreSQL's SQLSTATE, or the driver's or the system's code. */
export function codeOf(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * A connection fault as a StateConnectionError (undefined for any other error). `connected`: whether the run
 * had reached the server before, so a refusal now is a lost connection rather than a wrong URL.
 */
export function connectionFault(err: unknown, where: string, connected: boolean): StateConnectionError | undefined {
  const code = codeOf(err);
  if (code === undefined) return undefined;
  if (BAD_PASSWORD.has(code)) {
    return new StateConnectionError(
      where,
      `PostgreSQL at ${where} refused the user name or password; check the URL's user and password (or PGPASSWORD)`,
      2,
    );
  }
  if (code === NO_DATABASE) {
    return new StateConnectionError(
      where,
      `PostgreSQL at ${where}: the database does not exist; create it (createdb, or CREATE DATABASE) or fix the URL`,
      2,
    );
  }
  if (code === NO_ROOM) {
    return new StateConnectionError(
      where,
      `PostgreSQL at ${where} has no room for another session (${code}); a run holds up to six (one, two for ` +
        "lookups and three for commits): raise the server's max_connections or the user's connection limit, or run fewer at once",
      2,
    );
  }
  if (!connected && UNREACHABLE.has(code)) {
    return new StateConnectionError(
      where,
      `cannot reach PostgreSQL at ${where} (${code}); check the host and port, and that the server is running`,
      2,
    );
  }
  if (LOST.has(code) || UNREACHABLE.has(code)) {
    return new StateConnectionError(
      where,
      `the connection to PostgreSQL at ${where} was lost (${code}); nothing of the batch in progress was written, ` +
        'run the command again to resume',
      1,
    );
  }
  return undefined;
}
