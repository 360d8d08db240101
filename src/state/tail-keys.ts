/** The tail's lookup keys saved in the file: a later connection reads them instead of every tail entry's hash. */
import type { Database } from 'better-sqlite3';
import { withChecksum, withoutChecksum } from './checksum.js';
import { metaNumber, setMetaValue } from './meta-values.js';
import { META_KEYS } from './schema.js';

/** Keys per stored piece (1 MiB of Float64). */
const PIECE_KEYS = 131_072;

/** Keys of the entries after `from` up to `upto`, by id: keys[id - from - 1], or -1 where no entry has that id. */
export interface SavedTailKeys {
  from: number;
  upto: number;
  keys: Float64Array;
}

/** The saved keys, or undefined when the file holds none. */
export function readTailKeys(db: Database): SavedTailKeys | undefined {
  const from = metaNumber(db, META_KEYS.tailKeysFrom);
  const upto = metaNumber(db, META_KEYS.tailKeysUpto);
  if (from === undefined || upto === undefined || !Number.isSafeInteger(from) || !Number.isSafeInteger(upto))
    return undefined;
  if (upto <= from) return undefined;
  const keys = new Float64Array(upto - from);
  const bytes = new Uint8Array(keys.buffer);
  let filled = 0;
  for (const stored of db.prepare('SELECT keys FROM tail_keys ORDER BY piece').pluck().all() as Buffer[]) {
    // a damaged piece: the tail is read from the entries instead, which carry checksums of their own
    const piece = withoutChecksum(stored);
    if (piece === null || filled + piece.length > bytes.length) return undefined;
    bytes.set(piece, filled);
    filled += piece.length;
  }
  // a file changed by hand, or by a version that left the table but not the marks: read the tail from the entries
  return filled === bytes.length ? { from, upto, keys } : undefined;
}

/** Replaces the saved keys, inside the caller's transaction. */
export function writeTailKeys(db: Database, saved: SavedTailKeys): void {
  db.exec('CREATE TABLE IF NOT EXISTS tail_keys (piece INTEGER PRIMARY KEY, keys BLOB NOT NULL);');
  db.prepare('DELETE FROM tail_keys').run();
  const insert = db.prepare('INSERT INTO tail_keys (piece, keys) VALUES (?, ?)');
  const bytes = new Uint8Array(saved.keys.buffer, saved.keys.byteOffset, saved.keys.byteLength);
  const pieceBytes = PIECE_KEYS * 8;
  for (let piece = 0, at = 0; at < bytes.length; piece++, at += pieceBytes) {
    const keys = Buffer.from(bytes.buffer, bytes.byteOffset + at, Math.min(pieceBytes, bytes.length - at));
    insert.run(piece, withChecksum(keys));
  }
  setMetaValue(db, META_KEYS.tailKeysFrom, saved.from);
  setMetaValue(db, META_KEYS.tailKeysUpto, saved.upto);
}

/** Forgets the saved keys (a merge moved their entries into the key levels), inside the caller's transaction. */
export function clearTailKeys(db: Database): void {
  if (metaNumber(db, META_KEYS.tailKeysUpto) === undefined) return;
  db.prepare('DELETE FROM meta WHERE key IN (?, ?)').run(META_KEYS.tailKeysFrom, META_KEYS.tailKeysUpto);
  db.prepare('DELETE FROM tail_keys').run();
}
