/** An upgrade's copy of the entries table into a new one, by id, in pieces a killed run's successor carries on from. */
import type { Database } from 'better-sqlite3';
import { metaValue, setMetaValue } from './meta-values.js';
import { META_KEYS } from './schema.js';

export interface EntriesCopy {
  /** The table the entries are copied into. */
  table: string;
  /** Makes the new table (and whatever else the copy fills), in the first piece. */
  create: (db: Database) => void;
  /** Copies the entries with an id after `after` up to `upto`, in id order. */
  copy: (db: Database, after: number, upto: number) => void;
  /** Entries per piece. */
  rows: number;
}

/**
 * One piece of the copy, inside the caller's transaction: the new table first, then the next `rows` entries
 * (meta upgrade_copied records the last id copied). True once every entry is copied: the caller then swaps the
 * tables in the same transaction. Until then every reader sees the old table.
 */
export function copyEntriesPiece(db: Database, c: EntriesCopy): boolean {
  const exists =
    db.prepare("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?").pluck().get(c.table) === 1;
  if (!exists) {
    c.create(db);
    setMetaValue(db, META_KEYS.upgradeCopied, '0');
    return false;
  }
  const copied = Number(metaValue(db, META_KEYS.upgradeCopied) ?? 0);
  const last = db
    .prepare('SELECT max(id) FROM (SELECT id FROM entries WHERE id > ? ORDER BY id LIMIT ?)')
    .pluck()
    .get(copied, Math.max(1, Math.floor(c.rows))) as number | null;
  if (last !== null) {
    c.copy(db, copied, last);
    setMetaValue(db, META_KEYS.upgradeCopied, String(last));
    return false;
  }
  db.prepare('DELETE FROM meta WHERE key = ?').run(META_KEYS.upgradeCopied);
  return true;
}
