/** The upgrade of a schema-4 file to schema 5, in pieces that a killed run's successor carries on from. */
import type { Database } from 'better-sqlite3';
import { BlockWriter } from './key-blocks.js';
import { metaValue, setMetaValue } from './meta-values.js';
import { KEY_BLOCK_TABLES, META_KEYS } from './schema.js';

/** Pairs copied per transaction: small enough that a kill loses little work, big enough to amortize a commit. */
const COPY_KEYS = 1_000_000;
// each old table of rows, and the level of blocks its pairs go to, in the order they are copied
const COPIES = [
  ['keys', 'key_blocks'],
  ['keys_recent', 'key_blocks_recent'],
] as const;

/**
 * Where the copy stands (meta upgrade_keys_copied): the levels' marks when it began, the old table being copied
 * and the last pair copied from it.
 */
interface Copied {
  levels: string;
  table: number;
  k: number;
  id: number;
}

/**
 * One piece of the upgrade, inside the caller's transaction; true once the file is at schema 5. The pairs of
 * `keys` and `keys_recent` are copied in key order into blocks of `key_blocks` and `key_blocks_recent`; the old
 * tables stay the ones every reader sees until the last piece drops them. Ids, entries, the keys filters and
 * every mark in meta stay as they are. A copy whose levels moved since it began (an older version merged into
 * the file between two pieces) starts again.
 */
export function upgradeToV5Step(db: Database, copyKeys = COPY_KEYS): boolean {
  const levels = `${metaValue(db, META_KEYS.keysMainUpto) ?? 0} ${metaValue(db, META_KEYS.keysUpto) ?? 0}`;
  const exists =
    db.prepare("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'key_blocks'").pluck().get() === 1;
  const copied = exists ? parseCopied(metaValue(db, META_KEYS.upgradeKeysCopied)) : undefined;
  if (copied === undefined || copied.levels !== levels) {
    if (exists) db.exec('DROP TABLE key_blocks; DROP TABLE key_blocks_recent;');
    db.exec(KEY_BLOCK_TABLES);
    writeCopied(db, { levels, table: 0, k: -1, id: -1 });
    return false;
  }
  if (copied.table >= COPIES.length) {
    db.exec('DROP TABLE keys; DROP TABLE keys_recent;');
    db.prepare('DELETE FROM meta WHERE key = ?').run(META_KEYS.upgradeKeysCopied);
    return true;
  }
  const [from, to] = COPIES[copied.table];
  const insert = db.prepare(`INSERT INTO ${to} (first_k, keys) VALUES (?, ?)`);
  // format 1: the file says schema 5 once this step ends, and a version that writes schema 5 reads format 1 only
  // (a run killed before the upgrade to 6 leaves it there); merges after that upgrade write format 2
  const writer = new BlockWriter((first, blob) => void insert.run(first, blob), 1);
  const rows = db
    .prepare(`SELECT k, id FROM ${from} WHERE (k, id) > (?, ?) ORDER BY k, id LIMIT ?`)
    .raw()
    .all(copied.k, copied.id, Math.max(1, Math.floor(copyKeys))) as [number, number][];
  for (const [k, id] of rows) writer.push(k, id);
  let last = rows.length > 0 ? rows[rows.length - 1] : undefined;
  if (last !== undefined) {
    // the rest of the last key's pairs join this piece: a key's pairs are in one block
    const sameKey = db
      .prepare(`SELECT k, id FROM ${from} WHERE k = ? AND id > ? ORDER BY id`)
      .raw()
      .all(last[0], last[1]) as [number, number][];
    for (const [k, id] of sameKey) writer.push(k, id);
    if (sameKey.length > 0) last = sameKey[sameKey.length - 1];
  }
  writer.flush();
  writeCopied(
    db,
    rows.length < copyKeys || last === undefined
      ? { levels, table: copied.table + 1, k: -1, id: -1 }
      : { levels, table: copied.table, k: last[0], id: last[1] },
  );
  return false;
}

function parseCopied(value: string | undefined): Copied | undefined {
  const parts = value?.split(' ').map(Number);
  if (parts === undefined || parts.length !== 5 || !parts.every(Number.isFinite)) return undefined;
  return { levels: `${parts[0]} ${parts[1]}`, table: parts[2], k: parts[3], id: parts[4] };
}

function writeCopied(db: Database, c: Copied): void {
  setMetaValue(db, META_KEYS.upgradeKeysCopied, `${c.levels} ${c.table} ${c.k} ${c.id}`);
}
