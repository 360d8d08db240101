/** The commands that work on a state file only: a database URL given to them is refused in one line. */
import { describeState, isPostgresState } from '../../state/open-backend.js';
import { UserError } from '../run/exit-codes.js';

/**
 * Throws when `spec` names a database: `what` (a command) keeps or reads what only a file has; `fix` says what to
 * do instead.
 */
export function refuseDatabaseState(spec: string, what: string, fix: string): void {
  if (!isPostgresState(spec)) return;
  throw new UserError(`${what} works on a state file, not a database (${describeState(spec)}); ${fix}`);
}
