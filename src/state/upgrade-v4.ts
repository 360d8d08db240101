/** The upgrade of a schema-3 file to schema 4, in pieces that a killed run's successor carries on from. */
import type { Database } from 'better-sqlite3';
import { dayOf, encodeIds } from './id-lists.js';
import { copyEntriesPiece } from './entries-copy.js';
import { ENTRIES_INDEXES_V4, ENTRIES_TABLE_V4 } from './legacy-schema.js';
import { DUE_LISTS_TABLE } from './schema.js';
import { storedOf } from './stored-bytes.js';

/** Entries copied per transaction: small enough that a kill loses little work, big enough to amortize a commit. */
const COPY_ROWS = 100_000;
const NEW_TABLE = 'entries_v4';
const STORED_FUNCTION = 'uid2_stored_of';
// schema 4's columns, and what each is copied from: hashes and raw UIDs turned into their bytes, first_mapped dropped
const COLUMNS = 'id, type, hash, status, u, p, r, bucket_id, last_mapped, last_optout_check, opted_out_since, due';
const SOURCES =
  `id, type, ${STORED_FUNCTION}(hash), status, ${STORED_FUNCTION}(u), ${STORED_FUNCTION}(p), r, bucket_id, ` +
  'last_mapped, last_optout_check, opted_out_since, due';

/** storedOf for SQL: a text becomes what schema 4 keeps; NULL, and a value that is not text, stay as they are. */
function storedValue(value: unknown): unknown {
  return typeof value === 'string' ? storedOf(value) : value;
}

/**
 * One piece of the upgrade, inside the caller's transaction; true once the file is at schema 4. The old table
 * stays the one every reader sees until the last piece swaps the new one in with its indexes. Entry ids are
 * kept, so the keys tables, their filters and the saved tail keys stay valid as they are.
 */
export function upgradeToV4Step(db: Database, copyRows = COPY_ROWS): boolean {
  const copiedAll = copyEntriesPiece(db, {
    table: NEW_TABLE,
    create: () => {
      db.exec(ENTRIES_TABLE_V4(NEW_TABLE));
      db.exec(DUE_LISTS_TABLE);
    },
    copy: (_, after, upto) => {
      db.function(STORED_FUNCTION, { deterministic: true }, storedValue);
      db.prepare(
        `INSERT INTO ${NEW_TABLE} (${COLUMNS}) SELECT ${SOURCES} FROM entries WHERE id > ? AND id <= ? ORDER BY id`,
      ).run(after, upto);
      listByDay(db, after, upto);
    },
    rows: copyRows,
  });
  if (!copiedAll) return false;
  // the last piece: swap the tables, then index the new one
  db.exec(`DROP TABLE entries; ALTER TABLE ${NEW_TABLE} RENAME TO entries;`);
  db.exec(ENTRIES_INDEXES_V4);
  return true;
}

/**
 * With each piece copied: the copied entries that have an r, one due list piece per day of r (schema.ts
 * DUE_LISTS_TABLE), after the day's last piece. Store reads merge a day's many pieces later.
 */
function listByDay(db: Database, after: number, upto: number): void {
  const rows = db
    .prepare('SELECT id, r FROM entries WHERE id > ? AND id <= ? AND r IS NOT NULL ORDER BY id')
    .raw()
    .all(after, upto) as [number, number][];
  const byDay = new Map<number, number[]>();
  for (const [id, r] of rows) {
    const day = dayOf(r);
    let ids = byDay.get(day);
    if (ids === undefined) {
      ids = [];
      byDay.set(day, ids);
    }
    ids.push(id);
  }
  const lastPiece = db.prepare('SELECT max(piece) FROM due_lists WHERE day = ?').pluck();
  const insert = db.prepare('INSERT INTO due_lists (day, piece, ids) VALUES (?, ?, ?)');
  for (const [day, ids] of byDay) insert.run(day, ((lastPiece.get(day) as number | null) ?? 0) + 1, encodeIds(ids));
}
