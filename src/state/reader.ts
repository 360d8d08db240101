/** A state file read as it is, of any environment: checked to be ours, then read through a read-only store. */
import { statSync } from 'node:fs';
import type Database from 'better-sqlite3';
import { errnoOf, StateAccessError, stateAccessError } from './access.js';
import { StateFormatError, StateJournalError, StateNotFoundError } from './errors.js';
import { asDamage, checkSchema, damageReported } from './open.js';
import { sqliteDriver } from './sqlite-driver.js';
import { StateStore } from './store.js';
import { APPLICATION_ID, META_KEYS } from './schema.js';

export type { EntryTally } from './types.js';

/**
 * What reads a state file whole (`state info`, `export`): a damaged value throws StateDamagedError, except in
 * `entries()`, which skips a damaged entry (counted by `damaged()`) so that an export saves what is readable.
 */
export type StateReader = Pick<
  StateStore,
  'path' | 'meta' | 'getMeta' | 'entries' | 'damaged' | 'tally' | 'pendingChangeCounts' | 'lastRun' | 'close'
>;

/** The file and its -wal and -shm siblings, in bytes (0 for one that is not there). */
export function stateFileSizes(path: string): { file: number; wal: number; shm: number } {
  const size = (p: string): number => {
    try {
      return statSync(p).size;
    } catch {
      return 0;
    }
  };
  return { file: size(path), wal: size(`${path}-wal`), shm: size(`${path}-shm`) };
}

export function openStateReader(path: string): StateReader {
  let isFile: boolean;
  try {
    isFile = statSync(path).isFile();
  } catch {
    throw new StateNotFoundError(path, `state file '${path}' does not exist`);
  }
  if (!isFile) throw new StateFormatError(`state file '${path}' is not a regular file`, path);
  // outside the try: a missing driver is an installation problem
  const Driver = sqliteDriver();
  let db: Database.Database;
  const access = (): StateAccessError | null => stateAccessError(path, undefined, { writesFile: false });
  try {
    db = new Driver(path, { readonly: true, fileMustExist: true, timeout: 5_000 });
  } catch {
    throw (
      access() ??
      new StateAccessError(
        `cannot open '${path}' as a state file: check its permissions and those of its directory`,
        path,
      )
    );
  }
  const notOurs = new StateFormatError(
    `'${path}' is not a uid2-batch state file (not SQLite, damaged, or another program's database)`,
    path,
  );
  try {
    const application = db.prepare('SELECT value FROM meta WHERE key = ?').pluck().get(META_KEYS.application);
    if (application !== APPLICATION_ID) throw notOurs;
    checkSchema(db, path);
    return damageReported(new StateStore(db, path, true), path);
  } catch (err) {
    db.close();
    const code = errnoOf(err) ?? '';
    if (code === 'SQLITE_READONLY_ROLLBACK') throw new StateJournalError(path);
    if (/^SQLITE_(CANTOPEN|READONLY|PERM)/.test(code)) throw access() ?? notOurs;
    if (code.startsWith('SQLITE_')) throw notOurs;
    throw asDamage(err, path);
  }
}
