/** The upgrade of a schema-5 file to schema 6, in pieces that a killed run's successor carries on from. */
import type { Database } from 'better-sqlite3';
import { copyEntriesPiece } from './entries-copy.js';
import { type EntryValues, RecordWriter } from './entry-record.js';
import { StateFormatError } from './errors.js';
import { ENTRIES_TABLE, META_KEYS } from './schema.js';

/** Entries copied per transaction: small enough that a kill loses little work, big enough to amortize a commit. */
const COPY_ROWS = 100_000;
/** Old rows held in memory at once within a piece (a statement cannot be stepped while another one writes). */
const READ_ROWS = 10_000;
const NEW_TABLE = 'entries_v6';
// schema 5's columns, in the order rowValues reads them
const COLUMNS = 'id, type, hash, status, u, p, r, bucket_id, last_mapped, last_optout_check, opted_out_since, due';

type Cell = bigint | number | string | Buffer | null;

/**
 * Until the last piece a version that writes schema 5 may still write the file, and an entry it changes after it
 * was copied would otherwise keep its old record. These triggers, on the old table (dropped with it), take the copy
 * back to before the first such entry: its record and every later one are copied again.
 */
const STALE_TRIGGERS = ['UPDATE', 'DELETE']
  .map(
    (event) => `
CREATE TRIGGER ${NEW_TABLE}_stale_${event.toLowerCase()} AFTER ${event} ON entries
WHEN old.id <= CAST((SELECT value FROM meta WHERE key = '${META_KEYS.upgradeCopied}') AS INTEGER)
BEGIN
  DELETE FROM ${NEW_TABLE} WHERE id >= old.id;
  UPDATE meta SET value = CAST(old.id - 1 AS TEXT) WHERE key = '${META_KEYS.upgradeCopied}';
END;`,
  )
  .join('\n');

/**
 * One piece of the upgrade, inside the caller's transaction; true once the file is at schema 6. Each old row
 * becomes one record (entry-record.ts) under the same id, copied in id order in pieces; the old table stays the
 * one every reader sees until the last piece drops it (and its two indexes and the copy's triggers with it) and
 * renames the new one.
 * Entry ids are kept, so the key blocks, their filters, the due lists, the saved tail keys and every mark in meta
 * stay valid as they are. A value a record cannot hold stops the upgrade (rowValues says which): the piece is
 * rolled back and the file stays at schema 5, nothing dropped.
 */
export function upgradeToV6Step(db: Database, copyRows = COPY_ROWS): boolean {
  const copiedAll = copyEntriesPiece(db, {
    table: NEW_TABLE,
    create: () => db.exec(ENTRIES_TABLE(NEW_TABLE) + STALE_TRIGGERS),
    copy: (_, after, upto) => copyRecords(db, after, upto),
    rows: copyRows,
  });
  if (!copiedAll) return false;
  db.exec(`DROP TABLE entries; ALTER TABLE ${NEW_TABLE} RENAME TO entries;`);
  return true;
}

/** The entries with an id after `after` up to `upto`, read by their ids' range (no sort) and written as records. */
function copyRecords(db: Database, after: number, upto: number): void {
  // integers as bigints, so that one beyond what a double holds exactly is seen rather than rounded
  const read = db
    .prepare(`SELECT ${COLUMNS} FROM entries WHERE id > ? AND id <= ? ORDER BY id LIMIT ?`)
    .raw()
    .safeIntegers(true);
  const insert = db.prepare(`INSERT INTO ${NEW_TABLE} (id, record) VALUES (?, ?)`);
  const writer = new RecordWriter(1024 * 1024);
  for (let from = after; ; ) {
    const rows = read.all(from, upto, READ_ROWS) as Cell[][];
    for (const row of rows) {
      const id = row[0] as bigint;
      insert.run(id, writer.write(rowValues(db.name, id, row)));
    }
    if (rows.length < READ_ROWS) return;
    from = Number(rows[rows.length - 1][0]);
  }
}

/**
 * An old row's values as a record takes them. Schema 5 writes type 0 or 1, status 1 to 3, due 0 or 1, times as
 * integers, hashes and raw UIDs as bytes or text and bucket ids as text; a time that is not an integer of 32 bits
 * (a REAL, a negative one) is kept as the record's 8-byte float. A value no record can hold (another type or
 * status code, a time beyond what a double holds exactly, a text time, a number for a hash) would be lost or
 * changed by the copy: it stops the upgrade with the entry's id instead.
 */
function rowValues(path: string, id: bigint, row: Cell[]): EntryValues {
  const refuse = (column: string, what: string): never => {
    throw new StateFormatError(
      `state file ${path}: entry ${id} has ${what} in column ${column}, which schema 6 cannot hold, so the upgrade ` +
        'stopped and the file stays at schema 5 (nothing of it changed); uid2-batch never writes such a value: ' +
        'restore a backup of the file, or start a new one with another --state',
      path,
    );
  };
  const describe = (v: Cell): string =>
    v === null ? 'no value' : Buffer.isBuffer(v) ? 'a blob' : typeof v === 'string' ? 'a text' : `the number ${v}`;
  const code = (column: string, v: Cell, allowed: readonly number[]): number => {
    const n = typeof v === 'bigint' ? Number(v) : v;
    if (typeof n === 'number' && allowed.includes(n)) return n;
    return refuse(column, describe(v));
  };
  const time = (column: string, v: Cell): number | null => {
    if (v === null || typeof v === 'number') return v;
    if (typeof v === 'bigint') {
      if (v <= BigInt(Number.MAX_SAFE_INTEGER) && v >= BigInt(Number.MIN_SAFE_INTEGER)) return Number(v);
      return refuse(column, 'a time beyond what an 8-byte float holds exactly');
    }
    return refuse(column, describe(v));
  };
  const stored = (column: string, v: Cell): Buffer | string | null => {
    if (v === null || typeof v === 'string' || Buffer.isBuffer(v)) return v;
    return refuse(column, describe(v));
  };
  const [, type, hash, status, u, p, r, bucketId, lastMapped, lastOptoutCheck, optedOutSince, due] = row;
  if (typeof bucketId !== 'string' && bucketId !== null) refuse('bucket_id', describe(bucketId));
  return {
    type: code('type', type, [0, 1]),
    status: code('status', status, [0, 1, 2, 3]),
    due: code('due', due, [0, 1]) === 1,
    hash: stored('hash', hash) ?? refuse('hash', 'no value'),
    u: stored('u', u),
    p: stored('p', p),
    r: time('r', r),
    bucketId: bucketId as string | null,
    lastMappedS: time('last_mapped', lastMapped),
    lastOptoutCheckS: time('last_optout_check', lastOptoutCheck),
    optedOutSinceMs: time('opted_out_since', optedOutSince),
  };
}
