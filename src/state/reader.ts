/** A state file read as it is, of any environment: a read-only connection, checked to be ours, its records walked. */
import { statSync } from 'node:fs';
import type Database from 'better-sqlite3';
import { StateAccessError, stateAccessError } from './access.js';
import { ChecksumError } from './checksum.js';
import { EntryView, RecordFormatError } from './entry-record.js';
import { StateFormatError, StateJournalError, StateNotFoundError } from './errors.js';
import { checkedMetaValue } from './meta-values.js';
import { asDamage, checkSchema } from './open.js';
import { RecordWalker, WALK_PAGE } from './record-walk.js';
import { sqliteDriver } from './sqlite-driver.js';
import { pendingChangeCounts } from './store.js';
import { APPLICATION_ID, META_KEYS, TYPE_OF_CODE, statusOfCode } from './schema.js';
import type { EntryStatus, ExportedEntry } from './types.js';

/**
 * A state file read as it is: a damaged value throws StateDamagedError, except in `entries()`, which skips a
 * damaged entry (counted by `damaged()`) so that an export saves what is readable.
 */
export interface StateReader {
  readonly path: string;
  meta(key: string): string | null;
  entries(): IterableIterator<ExportedEntry>;
  damaged(): number;
  /** The entries by status, those without r, and for each bound those with r at most it: one walk of the table. */
  tally(bounds: readonly number[]): EntryTally;
  pendingChanges(): Record<string, number>;
  lastRun(): {
    command: string;
    startedAtS: number;
    nowS: number;
    finishedAtS: number | null;
    exitCode: number | null;
  } | null;
  close(): void;
}

export interface EntryTally {
  byStatus: Record<EntryStatus, number>;
  withoutR: number;
  atMost: number[];
}

function exported(v: EntryView): ExportedEntry {
  return {
    type: TYPE_OF_CODE[v.type] ?? 'email',
    hash: v.text(v.hashStart, v.hashSize) ?? '',
    status: statusOfCode(v.status),
    u: v.text(v.uStart, v.uSize),
    p: v.text(v.pStart, v.pSize),
    r: Number.isNaN(v.r) ? null : v.r,
  };
}

/** The entries in id order; a range that holds a damaged record is read again row by row, skipping it. */
function* recordEntries(db: Database.Database, page: number, onDamaged: () => void): Generator<ExportedEntry> {
  const walker = new RecordWalker(db);
  const rows = db.prepare('SELECT record FROM entries WHERE id > ? AND id <= ? ORDER BY id').pluck();
  const last = (db.prepare('SELECT max(id) FROM entries').pluck().get() as number | null) ?? 0;
  const range: ExportedEntry[] = [];
  const view = new EntryView();
  for (let after = 0; after < last; after += page) {
    range.length = 0;
    try {
      walker.walk(after, after + page, (_, v) => {
        range.push(exported(v));
      });
    } catch (err) {
      if (!(err instanceof ChecksumError || err instanceof RecordFormatError)) throw err;
      range.length = 0;
      for (const record of rows.all(after, after + page) as Buffer[]) {
        try {
          view.read(record, 0);
          range.push(exported(view));
        } catch (damage) {
          if (!(damage instanceof ChecksumError || damage instanceof RecordFormatError)) throw damage;
          onDamaged();
        }
      }
    }
    yield* range;
  }
}

function tallyRecords(db: Database.Database, bounds: readonly number[], page: number): EntryTally {
  const byStatus: Record<EntryStatus, number> = { mapped: 0, optout: 0, invalid: 0 };
  const atMost = bounds.map(() => 0);
  let withoutR = 0;
  new RecordWalker(db).walk(
    0,
    Number.MAX_SAFE_INTEGER,
    (_, v) => {
      byStatus[statusOfCode(v.status)]++;
      if (Number.isNaN(v.r)) withoutR++;
      else for (let i = 0; i < bounds.length; i++) if (v.r <= bounds[i]) atMost[i]++;
    },
    page,
  );
  return { byStatus, withoutR, atMost };
}

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

/** `recordsPage`: ids read per range in a walk of the table. */
export function openStateReader(path: string, recordsPage = WALK_PAGE): StateReader {
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
  let application: unknown;
  try {
    application = db.prepare('SELECT value FROM meta WHERE key = ?').pluck().get(META_KEYS.application);
  } catch (err) {
    db.close();
    const code = (err as { code?: unknown }).code;
    if (code === 'SQLITE_READONLY_ROLLBACK') throw new StateJournalError(path);
    if (typeof code === 'string' && /^SQLITE_(CANTOPEN|READONLY|PERM)/.test(code)) throw access() ?? notOurs;
    throw notOurs;
  }
  if (application !== APPLICATION_ID) {
    db.close();
    throw notOurs;
  }
  try {
    checkSchema(db, path);
  } catch (err) {
    db.close();
    throw asDamage(err, path);
  }
  let damaged = 0;
  const metaRow = db.prepare('SELECT value, sum FROM meta WHERE key = ?').raw();
  const checked = <T>(read: () => T): T => {
    try {
      return read();
    } catch (err) {
      throw asDamage(err, path);
    }
  };
  return {
    path,
    meta: (key) => checked(() => checkedMetaValue(key, metaRow.get(key)) ?? null),
    *entries() {
      yield* recordEntries(db, recordsPage, () => damaged++);
    },
    damaged: () => damaged,
    tally: (bounds) => checked(() => tallyRecords(db, bounds, recordsPage)),
    pendingChanges: () => pendingChangeCounts(db),
    lastRun: () => {
      const row = db
        .prepare('SELECT command, started_at, now, finished_at, exit_code FROM runs ORDER BY id DESC LIMIT 1')
        .raw()
        .get() as [string, number, number, number | null, number | null] | undefined;
      return row === undefined
        ? null
        : { command: row[0], startedAtS: row[1], nowS: row[2], finishedAtS: row[3], exitCode: row[4] };
    },
    close: () => db.close(),
  };
}
