/** The upgrade of a schema-2 file to schema 3, in pieces that a killed run's successor carries on from. */
import type { Database } from 'better-sqlite3';
import { keyOf } from './lookup-key.js';
import { copyEntriesPiece } from './entries-copy.js';
import { setMetaValue } from './meta-values.js';
import { ENTRIES_INDEXES_V3, ENTRIES_TABLE_V3, KEYS_TABLES_V3 } from './legacy-schema.js';
import { META_KEYS } from './schema.js';

/** Entries copied per transaction: small enough that a kill loses little work, big enough to amortize a commit. */
const COPY_ROWS = 100_000;
const NEW_TABLE = 'entries_v3';
const KEY_FUNCTION = 'uid2_state_key';
// the same columns in schemas 1, 2 and 3; only the table's key and indexes change
const COLUMNS =
  'id, type, hash, status, u, p, r, bucket_id, first_mapped, last_mapped, last_optout_check, opted_out_since, due';

/**
 * One piece of the upgrade, inside the caller's transaction; true once the file is at schema 3. The old table
 * stays the one every reader sees until the last piece swaps the new one in, with its indexes and keys.
 */
export function upgradeToV3Step(db: Database, copyRows = COPY_ROWS): boolean {
  const copiedAll = copyEntriesPiece(db, {
    table: NEW_TABLE,
    create: () => db.exec(ENTRIES_TABLE_V3(NEW_TABLE)),
    copy: (_, after, upto) =>
      db
        .prepare(
          `INSERT INTO ${NEW_TABLE} (${COLUMNS}) SELECT ${COLUMNS} FROM entries WHERE id > ? AND id <= ? ORDER BY id`,
        )
        .run(after, upto),
    rows: copyRows,
  });
  if (!copiedAll) return false;

  // the last piece: swap the tables, index the new one, fill keys in key order (one sort, pages written once)
  db.exec(`DROP TABLE entries; ALTER TABLE ${NEW_TABLE} RENAME TO entries;`);
  db.exec(ENTRIES_INDEXES_V3);
  db.exec(KEYS_TABLES_V3);
  db.function(KEY_FUNCTION, { deterministic: true }, (type, hash) => keyOf(Number(type), String(hash)));
  db.exec(`INSERT INTO keys (k, id) SELECT ${KEY_FUNCTION}(type, hash), id FROM entries ORDER BY 1, 2`);
  const maxId = db.prepare('SELECT max(id) FROM entries').pluck().get() as number | null;
  setMetaValue(db, META_KEYS.keysUpto, String(maxId ?? 0));
  setMetaValue(db, META_KEYS.keysMainUpto, String(maxId ?? 0));
  return true;
}
