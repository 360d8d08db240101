/** The two levels of the lookup index as tables of key blocks: walks in key order, and merges. */
import type { Database } from 'better-sqlite3';
import { BlockWriter, KeyBlock } from './key-blocks.js';

export type KeyLevel = 'key_blocks' | 'key_blocks_recent';

const BLOCK_PAGE = 256;

/** A sorted stream of (key, id) pairs: `next` moves to the next pair; past the last, the key is Infinity. */
export interface PairStream {
  key: number;
  id: number;
  next(): void;
}

/** The pairs of two sorted arrays. */
export function arrayPairs(keys: Float64Array, ids: Float64Array): PairStream {
  let i = 0;
  const stream: PairStream = {
    // past the end a typed array gives undefined
    key: keys[0] ?? Number.POSITIVE_INFINITY,
    id: ids[0],
    next(): void {
      i++;
      stream.key = keys[i] ?? Number.POSITIVE_INFINITY;
      stream.id = ids[i];
    },
  };
  return stream;
}

export function* levelBlocks(db: Database, level: KeyLevel): Generator<KeyBlock> {
  const page = db.prepare(`SELECT first_k, keys FROM ${level} WHERE first_k > ? ORDER BY first_k LIMIT ?`).raw();
  let after = -1;
  for (;;) {
    const rows = page.all(after, BLOCK_PAGE) as [number, Buffer][];
    for (const [first, blob] of rows) yield new KeyBlock(first, blob);
    if (rows.length < BLOCK_PAGE) return;
    after = rows[rows.length - 1][0];
  }
}

export function levelPairs(db: Database, level: KeyLevel): PairStream {
  const blocks = levelBlocks(db, level);
  let block: KeyBlock | undefined;
  let i = 0;
  const stream: PairStream = {
    key: Number.POSITIVE_INFINITY,
    id: 0,
    next(): void {
      while (block === undefined || i >= block.count) {
        const step = blocks.next();
        if (step.done === true) {
          stream.key = Number.POSITIVE_INFINITY;
          return;
        }
        block = step.value;
        i = 0;
      }
      stream.key = block.keyAt(i);
      stream.id = block.idAt(i);
      i++;
    },
  };
  stream.next();
  return stream;
}

/**
 * Merges a sorted stream of pairs into a level, in the caller's transaction: a block whose key range receives
 * pairs is cut again with them into full blocks, a short rest carried into the next range that receives pairs too;
 * blocks that receive nothing are not touched. A pair the level holds already is kept once (the writer drops it).
 */
export function mergeIntoLevel(db: Database, level: KeyLevel, incoming: PairStream): void {
  const insert = db.prepare(`INSERT INTO ${level} (first_k, keys) VALUES (?, ?)`);
  const remove = db.prepare(`DELETE FROM ${level} WHERE first_k = ?`);
  const writer = new BlockWriter((first, blob) => void insert.run(first, blob));
  const blocks = levelBlocks(db, level);
  // one block ahead: a block's range ends where the next one starts. New blocks of a range start below that next
  // block, and the walk reads pages after the last block it has read, so it never reads the blocks it writes.
  let step = blocks.next();
  while (step.done !== true) {
    const block = step.value;
    step = blocks.next();
    const end = step.done === true ? Number.POSITIVE_INFINITY : step.value.first;
    if (incoming.key >= end) {
      writer.flush();
      continue;
    }
    remove.run(block.first);
    for (let i = 0; i < block.count; i++) {
      const key = block.keyAt(i);
      const id = block.idAt(i);
      while (incoming.key < key || (incoming.key === key && incoming.id < id)) {
        writer.push(incoming.key, incoming.id);
        incoming.next();
      }
      writer.push(key, id);
    }
    while (incoming.key < end) {
      writer.push(incoming.key, incoming.id);
      incoming.next();
    }
  }
  while (incoming.key < Number.POSITIVE_INFINITY) {
    writer.push(incoming.key, incoming.id);
    incoming.next();
  }
  writer.flush();
}
