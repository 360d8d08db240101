/** Lookups of keys in one level of the lookup index, with the blocks read kept in memory while a budget has room. */
import type { Database } from 'better-sqlite3';
import { firstAbove, idList } from './id-lists.js';
import { forEachIdFrom, guessOf, readHeader, touchPair } from './key-blocks.js';
import type { KeyLevel } from './key-levels.js';
import { KeptBlocks } from './kept-blocks.js';
import { LIST_PAGE, prepared } from './queries.js';

// lookup keys are below 2^47: the end of the last block's range
const KEY_SPACE = 2 ** 47;

/** The bytes of blocks the level readers of one store may still keep in memory. */
export class BlockBudget {
  constructor(public left: number) {}
}

/**
 * Looks keys up in a level: finds each key's block among the first keys kept in memory, and reads the blocks it
 * needs in lists (one statement per list instead of a descent per key). Blocks read are kept while the budget has
 * room: random lookups of stored keys ask for every block of a big level. Both are dropped when the level may have
 * changed (`version`, the levels' marks in meta) or the store forgets what it read.
 *
 * A lookup goes in three passes over its keys: each key's block; each key's likely place in its block, reading the
 * bytes there, so that the cache misses of thousands of blocks overlap; then the search from that place.
 */
export class LevelReader {
  private firsts = new Float64Array(0);
  private kept = new KeptBlocks(0);
  /** The blocks of the lookup under way that are read but not kept. */
  private passing = new KeptBlocks(0);
  private version = '';
  // per key of a lookup: its block and its likely place in the block
  private block = new Int32Array(0);
  private guess = new Int32Array(0);
  // the sum of the bytes the second pass reads, kept so that the reads are not left out as unused
  touched = 0;

  constructor(
    private readonly db: Database,
    private readonly level: KeyLevel,
    private readonly budget = new BlockBudget(0),
  ) {}

  forget(): void {
    this.version = '';
    this.budget.left += this.kept.bytes;
    this.kept = new KeptBlocks(0);
  }

  /** Gives the id of every pair whose key is one of `sortedKeys` (ascending, each once). */
  idsOf(sortedKeys: ArrayLike<number>, version: string, onId: (id: number) => void): void {
    if (version !== this.version) {
      this.forget();
      const firsts = prepared(this.db, `SELECT first_k FROM ${this.level} ORDER BY first_k`).pluck().all() as number[];
      this.firsts = Float64Array.from(firsts);
      this.kept = new KeptBlocks(firsts.length);
      this.passing = new KeptBlocks(firsts.length);
      this.version = version;
    }
    const n = sortedKeys.length;
    if (this.block.length < n) {
      this.block = new Int32Array(n);
      this.guess = new Int32Array(n);
    }
    const { firsts, kept, passing, block, guess } = this;
    const missing: number[] = [];
    for (let i = 0; i < n; i++) {
      // the last block whose first key is at or below the key (-1: below them all)
      const b = firstAbove(firsts, sortedKeys[i]) - 1;
      block[i] = b;
      if (b >= 0 && !kept.has(b) && missing[missing.length - 1] !== b) missing.push(b);
    }
    if (missing.length > 0) this.readBlocks(missing);
    let touched = 0;
    for (let i = 0; i < n; i++) {
      const b = block[i];
      if (b < 0) continue;
      const k = kept.has(b) ? kept : passing;
      const span = (b + 1 < firsts.length ? firsts[b + 1] : KEY_SPACE) - firsts[b];
      guess[i] = guessOf(sortedKeys[i] - firsts[b], span, k.count[b]);
      touched += touchPair(k.chunks[k.chunkOf[b]], k.keysAt[b], k.kb[b], k.ib[b], k.count[b], guess[i]);
    }
    this.touched = touched;
    for (let i = 0; i < n; i++) {
      const b = block[i];
      if (b < 0) continue;
      const k = kept.has(b) ? kept : passing;
      const delta = sortedKeys[i] - firsts[b];
      forEachIdFrom(k.chunks[k.chunkOf[b]], k.keysAt[b], k.kb[b], k.ib[b], k.count[b], delta, guess[i], onId);
    }
    // the references to blocks not kept go with the call
    passing.clear(missing);
  }

  /** Reads the blocks of these indexes (ascending), keeping those the budget has room for; the others pass. */
  private readBlocks(indexes: readonly number[]): void {
    const wanted = indexes.map((b) => this.firsts[b]);
    const blocks = prepared(
      this.db,
      `SELECT count(*), CAST(group_concat(b.keys, '') AS BLOB) FROM json_each(?) AS j ` +
        `CROSS JOIN ${this.level} AS b ON b.first_k = j.value`,
    ).raw();
    for (let start = 0; start < wanted.length; start += LIST_PAGE) {
      const count = Math.min(LIST_PAGE, wanted.length - start);
      // one row: the blocks' blobs one after the other, in first-key order
      const [found, blobs] = blocks.get(idList(wanted.slice(start, start + count))) as [number, Buffer | null];
      if (found !== count || blobs === null) {
        throw new Error(`the ${this.level} level of the state file changed during a lookup; run again`);
      }
      let at = 0;
      for (let w = start; w < start + count; w++) {
        const header = readHeader(blobs, at);
        const keep = header.length <= this.budget.left;
        (keep ? this.kept : this.passing).keep(indexes[w], blobs, at, header);
        if (keep) this.budget.left -= header.length;
        at += header.length;
      }
      if (at !== blobs.length) throw new Error('a key block of the state file is damaged');
    }
  }
}
