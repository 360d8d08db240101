/** The two levels of the lookup index as tables of key blocks: lookups by key, walks in key order, merges. */
import type { Database, Statement } from 'better-sqlite3';
import { firstAbove } from './id-lists.js';
import { inListPages } from './in-lists.js';
import { BlockWriter, KeyBlock, MAX_BLOCK_PAIRS, blockLength } from './key-blocks.js';
import { IN_LIST_SIZES } from './queries.js';

/** The main level (entries up to keys_main_upto) and the recent one (after it, up to keys_upto). */
export type KeyLevel = 'key_blocks' | 'key_blocks_recent';

// blocks read per statement when a level is walked in order
const BLOCK_PAGE = 256;
// keys given per batch by forEachLevelKeys
const KEY_BATCH = 1 << 20;
// blocks read per statement by a lookup
const MAX_PAGE = IN_LIST_SIZES[IN_LIST_SIZES.length - 1];

/** A sorted stream of (key, id) pairs: `next` moves to the next pair, false (and key Infinity) at the end. */
export interface PairStream {
  key: number;
  id: number;
  next(): boolean;
}

/** The pairs of two sorted arrays, those with an id above `after` only. */
export function arrayPairs(keys: Float64Array, ids: Float64Array, after: number): PairStream {
  let i = -1;
  const stream: PairStream = {
    key: Number.POSITIVE_INFINITY,
    id: 0,
    next(): boolean {
      do i++;
      while (i < keys.length && ids[i] <= after);
      if (i >= keys.length) {
        stream.key = Number.POSITIVE_INFINITY;
        return false;
      }
      stream.key = keys[i];
      stream.id = ids[i];
      return true;
    },
  };
  stream.next();
  return stream;
}

/** Every block of a level in key order, read a page of blocks per statement. */
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

/** The pairs of a level in key order, as a stream (for a fold, which merges one level into the other). */
export function levelPairs(db: Database, level: KeyLevel): PairStream {
  const blocks = levelBlocks(db, level);
  const pairs = new BlockPairs();
  let i = 0;
  const stream: PairStream = {
    key: Number.POSITIVE_INFINITY,
    id: 0,
    next(): boolean {
      while (i >= pairs.count) {
        const step = blocks.next();
        if (step.done === true) {
          stream.key = Number.POSITIVE_INFINITY;
          return false;
        }
        pairs.load(step.value);
        i = 0;
      }
      stream.key = pairs.keys[i];
      stream.id = pairs.ids[i];
      i++;
      return true;
    },
  };
  stream.next();
  return stream;
}

/**
 * Gives every distinct key of a level in order, a batch at a time (keys[0..n), the array reused), with only the
 * pairs whose id is above `after` when given: what the keys filters are filled from.
 */
export function forEachLevelKeys(
  db: Database,
  level: KeyLevel,
  onKeys: (keys: Float64Array, n: number) => void,
  after = -1,
): void {
  const batch = new Float64Array(KEY_BATCH);
  let n = 0;
  let last = -1;
  for (const pairs = levelPairs(db, level); pairs.key < Number.POSITIVE_INFINITY; pairs.next()) {
    if (pairs.key === last || pairs.id <= after) continue;
    batch[n++] = pairs.key;
    last = pairs.key;
    if (n === KEY_BATCH) {
      onKeys(batch, n);
      n = 0;
    }
  }
  if (n > 0) onKeys(batch, n);
}

/** The pairs of one block at a time, decoded whole, in arrays reused from block to block. */
class BlockPairs {
  keys = new Float64Array(MAX_BLOCK_PAIRS);
  ids = new Float64Array(MAX_BLOCK_PAIRS);
  count = 0;

  load(block: KeyBlock): void {
    // a key shared by more pairs than a block holds makes a bigger block
    if (block.count > this.keys.length) {
      this.keys = new Float64Array(block.count);
      this.ids = new Float64Array(block.count);
    }
    block.decodeInto(this.keys, this.ids);
    this.count = block.count;
  }
}

/**
 * What the level readers of one store may keep of their levels' blocks in memory, in bytes: shared by both levels,
 * taken as blocks are kept and given back when a level changes.
 */
export class BlockBudget {
  constructor(public left: number) {}
}

/**
 * Looks keys up in a level. The reader keeps the level's first keys (one number per block) in memory, finds the
 * block of each key there, and reads the blocks it needs in IN (...) lists by first key: one statement per list
 * instead of a descent per key. The blocks it reads it keeps while the budget has room: keys are hashes, so random
 * lookups of stored keys ask for every block of a big level, and a block kept saves one of the two reads from the
 * file each such lookup costs (the other is its entry's). Both are dropped when the level may have changed
 * (`version`: the levels' marks in meta, which every merge moves), or when the store forgets what it read (`forget`,
 * after a failed transaction).
 */
export class LevelReader {
  private firsts = new Float64Array(0);
  private version = '';
  private readonly statements = new Map<number, Statement>();
  // the blocks kept, by index in firsts, and the bytes they take from the budget
  private kept: (KeyBlock | undefined)[] = [];
  private keptBytes = 0;

  constructor(
    private readonly db: Database,
    private readonly level: KeyLevel,
    private readonly budget = new BlockBudget(0),
  ) {}

  /** Drops the first keys and the blocks kept, giving their bytes back to the budget. */
  forget(): void {
    this.version = '';
    this.firsts = new Float64Array(0);
    this.kept = [];
    this.budget.left += this.keptBytes;
    this.keptBytes = 0;
  }

  /** Gives the id of every pair whose key is one of `sortedKeys` (ascending, each once). */
  idsOf(sortedKeys: ArrayLike<number>, version: string, onId: (id: number) => void): void {
    if (version !== this.version) {
      this.forget();
      const firsts = this.db.prepare(`SELECT first_k FROM ${this.level} ORDER BY first_k`).pluck().all() as number[];
      this.firsts = Float64Array.from(firsts);
      // one slot per block from the start: an array filled at random indexes would turn into a slow dictionary
      this.kept = new Array<KeyBlock | undefined>(firsts.length).fill(undefined);
      this.version = version;
    }
    // per key, the index of its block (keys below every block have none)
    const blockOf = new Int32Array(sortedKeys.length);
    const missing: number[] = [];
    for (let i = 0; i < sortedKeys.length; i++) {
      // the last block whose first key is at or below the key
      const b = firstAbove(this.firsts, sortedKeys[i]) - 1;
      blockOf[i] = b;
      if (b >= 0 && this.kept[b] === undefined && missing[missing.length - 1] !== b) missing.push(b);
    }
    const read = missing.length > 0 ? this.readBlocks(missing) : [];
    let m = 0;
    let last = -1;
    let block: KeyBlock | undefined;
    for (let i = 0; i < sortedKeys.length; i++) {
      const b = blockOf[i];
      if (b < 0) continue;
      if (b !== last) {
        // blocks come in ascending order, and so do the ones read
        if (m < missing.length && missing[m] === b) block = read[m++];
        else block = this.kept[b];
        last = b;
      }
      (block as KeyBlock).forEachId(sortedKeys[i], onId);
    }
  }

  /** Reads the blocks of these indexes (ascending) from the file, in order, keeping those the budget has room for. */
  private readBlocks(indexes: readonly number[]): KeyBlock[] {
    const read: KeyBlock[] = [];
    const firsts = indexes.map((b) => this.firsts[b]);
    for (const [start, size, params] of inListPages(firsts)) {
      const count = Math.min(MAX_PAGE, firsts.length - start);
      // one row: the blocks' blobs one after the other, in first-key order (each says its own length)
      const [found, blobs] = this.blockStatement(size).get(params) as [number, Buffer | null];
      if (found !== count || blobs === null) {
        throw new Error(`the ${this.level} level of the state file changed during a lookup; run again`);
      }
      let at = 0;
      for (let w = start; w < start + count; w++) {
        const end = at + blockLength(blobs, at);
        const bytes = end - at;
        if (bytes <= this.budget.left) {
          // a copy: a block kept must not hold the whole statement's blob in memory
          const block = new KeyBlock(firsts[w], Buffer.from(blobs.subarray(at, end)));
          this.kept[indexes[w]] = block;
          this.keptBytes += bytes;
          this.budget.left -= bytes;
          read.push(block);
        } else read.push(new KeyBlock(firsts[w], blobs.subarray(at, end)));
        at = end;
      }
    }
    return read;
  }

  private blockStatement(size: number): Statement {
    let stmt = this.statements.get(size);
    if (stmt === undefined) {
      stmt = this.db
        .prepare(
          `SELECT count(*), CAST(group_concat(keys, '') AS BLOB) FROM ${this.level} ` +
            `WHERE first_k IN (${new Array(size).fill('?').join(',')})`,
        )
        .raw();
      this.statements.set(size, stmt);
    }
    return stmt;
  }
}

/**
 * Merges a sorted stream of pairs into a level, in the caller's transaction. The level is walked in key order;
 * a block whose key range receives pairs is deleted and its pairs, with the new ones, are cut into full blocks
 * again, what does not fill a block being carried into the next block's range when that one receives pairs too
 * (so that a merge of many pairs leaves full blocks) and written as a short block when not. Blocks that receive
 * nothing are not touched. A pair the level holds already is kept once.
 */
export function mergeIntoLevel(db: Database, level: KeyLevel, incoming: PairStream): void {
  const insert = db.prepare(`INSERT INTO ${level} (first_k, keys) VALUES (?, ?)`);
  const remove = db.prepare(`DELETE FROM ${level} WHERE first_k = ?`);
  const writer = new BlockWriter((first, blob) => void insert.run(first, blob));
  let lastKey = -1;
  let lastId = -1;
  const push = (key: number, id: number): void => {
    if (key === lastKey && id === lastId) return;
    writer.push(key, id);
    lastKey = key;
    lastId = id;
  };
  const blocks = levelBlocks(db, level);
  const pairs = new BlockPairs();
  // one block ahead: a block's range ends where the next one starts. New blocks of a range start below that next
  // block, and the walk reads pages after the last block it has read, so it never reads the blocks it writes.
  let step = blocks.next();
  while (step.done !== true) {
    const block = step.value;
    step = blocks.next();
    const end = step.done === true ? Number.POSITIVE_INFINITY : step.value.first;
    // pairs below this block's first key went into the range before (the first block's reaches down to any key)
    if (incoming.key >= end) {
      if (writer.pending > 0) writer.flush();
      continue;
    }
    remove.run(block.first);
    pairs.load(block);
    const { keys, ids } = pairs;
    for (let i = 0; i < pairs.count; i++) {
      const key = keys[i];
      while (incoming.key < key || (incoming.key === key && incoming.id < ids[i])) {
        push(incoming.key, incoming.id);
        incoming.next();
      }
      push(key, ids[i]);
    }
    while (incoming.key < end) {
      push(incoming.key, incoming.id);
      incoming.next();
    }
  }
  // after the last block (or into an empty level)
  while (incoming.key < Number.POSITIVE_INFINITY) {
    push(incoming.key, incoming.id);
    incoming.next();
  }
  writer.flush();
}

/** Empties a level (after a fold has moved its pairs into the main one). */
export function clearLevel(db: Database, level: KeyLevel): void {
  db.prepare(`DELETE FROM ${level}`).run();
}
