// A state file opened for reading by the `state` commands: a read-only SQLite connection, checked to be ours.
import { statSync } from 'node:fs';
import type Database from 'better-sqlite3';
import { StateJournalError } from '../../state/errors.js';
import { RecordWalker, WALK_PAGE } from '../../state/record-walk.js';
import { sqliteDriver } from '../../state/sqlite-driver.js';
import { APPLICATION_ID, META_KEYS, TYPE_OF_CODE, statusOfCode } from '../../state/schema.js';
import { textOfStored } from '../../state/stored-bytes.js';
import type { EntryStatus, ExportedEntry as StoredExport } from '../../state/types.js';
import { UserError } from '../shared/exit-codes.js';
import { quoted } from '../shared/user-values.js';

/**
 * The `state` commands read any state file, of any environment, without opening it as a run would (that refuses
 * another environment and writes): plain SQL on a read-only connection. A file whose entries table is (id, record)
 * (schema 6) is read record by record in id order; an older one by its columns.
 */
export interface StateFileReader {
  readonly path: string;
  meta(key: string): string | null;
  /** Rows of the entries table as exported: hashes and raw UIDs, never an email or phone. */
  entries(): IterableIterator<ExportedEntry>;
  /**
   * The entries by status, those without a refresh time (tombstones, invalids, v2 entries), and for each bound the
   * entries whose refresh time is at most it: one pass over the table for a schema-6 file (there is no index on r;
   * remap-due reads its per-day due lists instead), a count in SQL per figure for an older one.
   */
  tally(bounds: readonly number[]): EntryTally;
  pendingChanges(): Record<string, number>;
  lastRun(): { command: string; startedAtS: number; finishedAtS: number | null; exitCode: number | null } | null;
  close(): void;
}

export interface EntryTally {
  byStatus: Record<EntryStatus, number>;
  withoutR: number;
  /** Per bound, in the order given: the entries with an r at most the bound. */
  atMost: number[];
}

/** An entry as `state export` writes it: the stored entry's export, without its row id. */
export type ExportedEntry = Omit<StoredExport, 'id'>;

/** The entries of a schema-6 file in id order, read a range of `page` ids at a time: type, status, text values, r. */
function* recordEntries(db: Database.Database, page: number): Generator<ExportedEntry> {
  const walker = new RecordWalker(db);
  const last = (db.prepare('SELECT max(id) FROM entries').pluck().get() as number | null) ?? 0;
  const range: ExportedEntry[] = [];
  // a range at a time: the caller may stop or query between two entries
  for (let after = 0; after < last; after += page) {
    range.length = 0;
    walker.walk(after, after + page, (_, v) => {
      range.push({
        type: TYPE_OF_CODE[v.type] ?? 'email',
        hash: v.text(v.hashStart, v.hashSize) ?? '',
        status: statusOfCode(v.status),
        u: v.text(v.uStart, v.uSize),
        p: v.text(v.pStart, v.pSize),
        r: Number.isNaN(v.r) ? null : v.r,
      });
    });
    yield* range;
  }
}

/** tally() of a schema-6 file: one walk of its records. */
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

/** tally() of an older file: its columns counted in SQL. */
function tallyColumns(db: Database.Database, bounds: readonly number[]): EntryTally {
  const byStatus: Record<EntryStatus, number> = { mapped: 0, optout: 0, invalid: 0 };
  for (const [code, n] of db.prepare('SELECT status, COUNT(*) FROM entries GROUP BY status').raw().all() as [
    number,
    number,
  ][])
    byStatus[statusOfCode(code)] += n;
  const atMost = db.prepare('SELECT COUNT(*) FROM entries WHERE r IS NOT NULL AND r <= ?').pluck();
  return {
    byStatus,
    withoutR: db.prepare('SELECT COUNT(*) FROM entries WHERE r IS NULL').pluck().get() as number,
    atMost: bounds.map((bound) => atMost.get(bound) as number),
  };
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

/** `recordsPage`: ids read per range in a walk of a schema-6 file (tests give small ones). */
export function openStateForReading(path: string, recordsPage = WALK_PAGE): StateFileReader {
  let isFile: boolean;
  try {
    isFile = statSync(path).isFile();
  } catch {
    throw new UserError(`state file ${quoted(path)} does not exist`);
  }
  if (!isFile) throw new UserError(`state file ${quoted(path)} is not a regular file`);
  // outside the try: a missing driver is an installation problem, not one of the file's permissions
  const Driver = sqliteDriver();
  let db: Database.Database;
  try {
    db = new Driver(path, { readonly: true, fileMustExist: true, timeout: 5_000 });
  } catch {
    throw new UserError(
      `cannot open ${quoted(path)} as a state file: check its permissions and those of its directory`,
    );
  }
  const notOurs = new UserError(
    `${quoted(path)} is not a uid2-batch state file (not SQLite, damaged, or another program's database)`,
  );
  let application: unknown;
  try {
    application = db.prepare('SELECT value FROM meta WHERE key = ?').pluck().get(META_KEYS.application);
  } catch (err) {
    db.close();
    // a run killed while it wrote left a journal that this read-only connection cannot roll back
    if ((err as { code?: unknown }).code === 'SQLITE_READONLY_ROLLBACK') throw new StateJournalError(path);
    throw notOurs;
  }
  if (application !== APPLICATION_ID) {
    db.close();
    throw notOurs;
  }
  const hasTable = (name: string): boolean =>
    db.prepare("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?").get(name) !== undefined;
  const hasPending = hasTable('pending_changes');
  // schema 6 by the table itself, not by meta: whatever the file says of itself, its columns are what can be read
  const hasRecords = (db.prepare('PRAGMA table_info(entries)').all() as { name: string }[]).some(
    (c) => c.name === 'record',
  );
  return {
    path,
    meta: (key) => {
      const v = db.prepare('SELECT value FROM meta WHERE key = ?').pluck().get(key);
      return typeof v === 'string' ? v : null;
    },
    *entries() {
      if (hasRecords) {
        yield* recordEntries(db, recordsPage);
        return;
      }
      const rows = db
        .prepare('SELECT type, hash, status, u, p, r FROM entries ORDER BY id')
        .raw()
        .iterate() as IterableIterator<[number, unknown, number, unknown, unknown, number | null]>;
      // hashes and raw UIDs are kept as their bytes from schema 4 on, as text before
      for (const [type, hash, status, u, p, r] of rows) {
        const [h, uid, prev] = [textOfStored(hash) ?? '', textOfStored(u), textOfStored(p)];
        yield { type: TYPE_OF_CODE[type] ?? 'email', hash: h, status: statusOfCode(status), u: uid, p: prev, r };
      }
    },
    tally: (bounds) => (hasRecords ? tallyRecords(db, bounds, recordsPage) : tallyColumns(db, bounds)),
    pendingChanges: () => {
      const out: Record<string, number> = {};
      if (!hasPending) return out;
      for (const [kind, n] of db.prepare('SELECT kind, COUNT(*) FROM pending_changes GROUP BY kind').raw().all() as [
        string,
        number,
      ][])
        out[kind] = n;
      return out;
    },
    lastRun: () => {
      const row = db
        .prepare('SELECT command, started_at, finished_at, exit_code FROM runs ORDER BY id DESC LIMIT 1')
        .raw()
        .get() as [string, number, number | null, number | null] | undefined;
      return row === undefined ? null : { command: row[0], startedAtS: row[1], finishedAtS: row[2], exitCode: row[3] };
    },
    close: () => db.close(),
  };
}
