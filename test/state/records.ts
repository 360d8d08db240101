// Reads a state file's entries in tests without the store: schema 6's records decoded, or schemas 4-5's columns.
import type BetterSqlite3 from 'better-sqlite3';
import { EntryView, type EntryValues, RecordWriter } from '../../src/state/entry-record.js';
import { storedOf } from '../../src/state/stored-bytes.js';
import Database from '../helpers/sqlite-driver.js';

/** An entry as its record holds it, with its id. */
export type EntryRow = EntryValues & { id: number };

/** Every entry of the table `table` (schema 6: id, record), decoded, in id order. */
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

// the columns of schemas 4 and 5, in the order columnRowsOf reads them
const COLUMNS = 'id, type, hash, status, u, p, r, bucket_id, last_mapped, last_optout_check, opted_out_since, due';

/** Every entry of a schema-4 or -5 file read with SQL, in id order, as the values a record would hold. */
export function columnRowsOf(db: BetterSqlite3.Database): EntryRow[] {
  const rows = db.prepare(`SELECT ${COLUMNS} FROM entries ORDER BY id`).raw().all() as unknown[][];
  return rows.map(([id, type, hash, status, u, p, r, bucketId, lastMapped, check, since, due]) => ({
    id: id as number,
    type: type as number,
    status: status as number,
    due: due === 1,
    hash: hash as Buffer | string,
    u: u as Buffer | string | null,
    p: p as Buffer | string | null,
    r: r as number | null,
    bucketId: bucketId as string | null,
    lastMappedS: lastMapped as number | null,
    lastOptoutCheckS: check as number | null,
    optedOutSinceMs: since as number | null,
  }));
}

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
