// Reads a state file's entries in tests without the store: its records decoded.
import type BetterSqlite3 from 'better-sqlite3';
import { EntryView, type EntryValues, RecordWriter } from '../../src/state/entry-record.js';
import { storedOf } from '../../src/state/entry-record.js';
import Database from '../helpers/sqlite-driver.js';

/** An entry as its record holds it, with its id. */
export type EntryRow = EntryValues & { id: number };

/** Every entry of the table `table` (id, record), decoded, in id order. */
export function entryRowsOf(db: BetterSqlite3.Database, table = 'entries'): EntryRow[] {
  const view = new EntryView();
  const rows: EntryRow[] = [];
  for (const [id, record] of db.prepare(`SELECT id, record FROM ${table} ORDER BY id`).raw().iterate() as Iterable<
    [number, Buffer]
  >) {
    const end = view.read(record, 0);
    if (end !== record.length) throw new Error(`entry ${id}: its record has ${record.length - end} bytes too many`);
    // each row's record is a buffer of its own, so the values' views of it stay valid
    rows.push({ id, ...view.values() });
  }
  return rows;
}

/** entryRowsOf the state file at `path`, through a read-only connection of its own. */
export function entryRowsAt(path: string): EntryRow[] {
  const db = new Database(path, { readonly: true });
  try {
    return entryRowsOf(db);
  } finally {
    db.close();
  }
}

/** How many entries of the file at `path` match `which`. */
export const countEntries = (path: string, which: (e: EntryRow) => boolean): number =>
  entryRowsAt(path).filter(which).length;

/** The record of an entry with these values: hashes and raw UIDs as base64 text, kept as the store keeps them. */
export function recordOf(
  v: { hash: string; u?: string | null; p?: string | null } & Partial<Omit<EntryValues, 'hash' | 'u' | 'p'>>,
): Buffer {
  const stored = (text: string | null | undefined) => (text === null || text === undefined ? null : storedOf(text));
  return new RecordWriter().write({
    type: 0,
    status: 1,
    due: false,
    r: null,
    bucketId: null,
    lastMappedS: null,
    lastOptoutCheckS: null,
    optedOutSinceMs: null,
    ...v,
    hash: storedOf(v.hash),
    u: stored(v.u),
    p: stored(v.p),
  });
}
