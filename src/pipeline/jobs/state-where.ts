/**
 * Where a state is, as the commands speak of it: a database URL shown without its password, and refused in one
 * line by the commands that work on a state file only.
 */
import { describeState, isPostgresState } from '../../state/open-backend.js';
import { UserError } from '../run/exit-codes.js';

/** For the CLI, which opens no state: how messages show what --state names. */
export { describeState };

/**
 * Throws when `spec` names a database: `what` (a command) keeps or reads what only a file has; `fix` says what to
 * do instead.
 */
export function refuseDatabaseState(spec: string, what: string, fix: string): void {
  if (!isPostgresState(spec)) return;
  throw new UserError(`${what} works on a state file, not a database (${describeState(spec)}); ${fix}`);
}
