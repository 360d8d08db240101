// A state file opened for reading by the `state` commands: a read-only SQLite connection, checked to be ours.
import { statSync } from 'node:fs';
import type Database from 'better-sqlite3';
import { EntryView } from '../../state/entry-record.js';
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
  countByStatus(): Record<EntryStatus, number>;
  /**
   * Entries with a refresh time in (from, to], or at most `to` when from is null: a pass over the table (from schema 4
   * on there is no index on r; remap-due reads its per-day due lists instead), which is what `state info` can afford.
   */
  countDueBetween(fromS: number | null, toS: number): number;
  /** Entries with no refresh time: tombstones, invalids, v2 entries. */
  countWithoutR(): number;
  pendingChanges(): Record<string, number>;
  lastRun(): { command: string; startedAtS: number; finishedAtS: number | null; exitCode: number | null } | null;
  close(): void;
}

/** An entry as `state export` writes it: the stored entry's export, without its row id. */
export type ExportedEntry = Omit<StoredExport, 'id'>;

/** Records read per query while walking a schema-6 table: a page is decoded before the next is asked for. */
const RECORDS_PAGE = 10_000;

/** Every record of a schema-6 entries table, in id order, given in turn (the view is reused). */
function* records(db: Database.Database, pageRows: number): Generator<EntryView> {
  const page = db.prepare('SELECT id, record FROM entries WHERE id > ? ORDER BY id LIMIT ?').raw();
  const view = new EntryView();
  for (let after = -1; ; ) {
    // a page at a time rather than one statement for the walk: the caller may query between two entries
    const rows = page.all(after, pageRows) as [number, Buffer][];
    for (const [, record] of rows) {
      view.read(record, 0);
      yield view;
    }
    if (rows.length < pageRows) return;
    after = rows[rows.length - 1][0];
  }
}

/** How many records of the table `count` says yes to. */
function countRecords(db: Database.Database, pageRows: number, count: (view: EntryView) => boolean): number {
  let n = 0;
  for (const view of records(db, pageRows)) if (count(view)) n++;
  return n;
}

/** The entries of a schema-6 file: the record's type, status, hashes and raw UIDs as text, and r. */
function* recordEntries(db: Database.Database, pageRows: number): Generator<ExportedEntry> {
  for (const v of records(db, pageRows)) {
    yield {
      type: TYPE_OF_CODE[v.type] ?? 'email',
      hash: textOfStored(v.stored(v.hashStart, v.hashSize)) ?? '',
      status: statusOfCode(v.status),
      u: textOfStored(v.stored(v.uStart, v.uSize)),
      p: textOfStored(v.stored(v.pStart, v.pSize)),
      r: Number.isNaN(v.r) ? null : v.r,
    };
  }
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

/** `recordsPage`: records read per query in a walk of a schema-6 file (tests give small ones). */
export function openStateForReading(path: string, recordsPage = RECORDS_PAGE): StateFileReader {
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
  } catch {
    db.close();
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
    countByStatus: () => {
      const out: Record<EntryStatus, number> = { mapped: 0, optout: 0, invalid: 0 };
      if (hasRecords) {
        for (const view of records(db, recordsPage)) out[statusOfCode(view.status)]++;
        return out;
      }
      for (const [code, n] of db.prepare('SELECT status, COUNT(*) FROM entries GROUP BY status').raw().all() as [
        number,
        number,
      ][])
        out[statusOfCode(code)] += n;
      return out;
    },
    countDueBetween: (fromS, toS) =>
      hasRecords
        ? countRecords(db, recordsPage, (v) => v.r <= toS && (fromS === null || v.r > fromS))
        : fromS === null
          ? (db.prepare('SELECT COUNT(*) FROM entries WHERE r IS NOT NULL AND r <= ?').pluck().get(toS) as number)
          : (db
              .prepare('SELECT COUNT(*) FROM entries WHERE r IS NOT NULL AND r > ? AND r <= ?')
              .pluck()
              .get(fromS, toS) as number),
    countWithoutR: () =>
      hasRecords
        ? countRecords(db, recordsPage, (v) => Number.isNaN(v.r))
        : (db.prepare('SELECT COUNT(*) FROM entries WHERE r IS NULL').pluck().get() as number),
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
