/** Lookups of keys in one level of the lookup index, with the blocks read kept in memory while a budget has room. */
import type { Database } from 'better-sqlite3';
import { firstAbove, idList } from './id-lists.js';
import { BLOCK_HEADER, type BlockHeader, forEachIdFrom, guessOf, readHeader, touchPair } from './key-blocks.js';
import type { KeyLevel } from './key-levels.js';
import { KeptBlocks } from './kept-blocks.js';
import { LIST_PAGE, prepared } from './queries.js';

// lookup keys are below 2^47: the end of the last block's range
const KEY_SPACE = 2 ** 47;

/** The bytes of blocks the level readers of one store may still keep in memory. */
export class BlockBudget {
  constructor(public left: number) {}
}

/** Where blocks' pairs are and their headers, by position: per key of a lookup, or per block read. */
class Places {
  bytes: Uint8Array[] = [];
  keysAt = new Float64Array(0);
  kb = new Uint8Array(0);
  ib = new Uint8Array(0);
  count = new Int32Array(0);
  block = new Int32Array(0);
  delta = new Float64Array(0);
  guess = new Int32Array(0);

  reserve(n: number): this {
    if (this.block.length >= n) return this;
    this.keysAt = new Float64Array(n);
    this.kb = new Uint8Array(n);
    this.ib = new Uint8Array(n);
    this.count = new Int32Array(n);
    this.block = new Int32Array(n);
    this.delta = new Float64Array(n);
    this.guess = new Int32Array(n);
    return this;
  }

  set(i: number, bytes: Uint8Array, keysAt: number, kb: number, ib: number, count: number): void {
    this.bytes[i] = bytes;
    this.keysAt[i] = keysAt;
    this.kb[i] = kb;
    this.ib[i] = ib;
    this.count[i] = count;
  }
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
  private version = '';
  private readonly searches = new Places();
  private readonly read = new Places();
  private readonly header: BlockHeader = { kb: 0, ib: 0, count: 0 };
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
    this.firsts = new Float64Array(0);
    this.kept = new KeptBlocks(0);
  }

  /** Gives the id of every pair whose key is one of `sortedKeys` (ascending, each once). */
  idsOf(sortedKeys: ArrayLike<number>, version: string, onId: (id: number) => void): void {
    if (version !== this.version) {
      this.forget();
      const firsts = prepared(this.db, `SELECT first_k FROM ${this.level} ORDER BY first_k`).pluck().all() as number[];
      this.firsts = Float64Array.from(firsts);
      this.kept = new KeptBlocks(firsts.length);
      this.version = version;
    }
    const n = sortedKeys.length;
    const s = this.searches.reserve(n);
    const { firsts, kept } = this;
    const missing: number[] = [];
    for (let i = 0; i < n; i++) {
      // the last block whose first key is at or below the key (-1: below them all)
      const b = firstAbove(firsts, sortedKeys[i]) - 1;
      s.block[i] = b;
      if (b >= 0 && !kept.has(b) && missing[missing.length - 1] !== b) missing.push(b);
    }
    const r = this.read;
    if (missing.length > 0) this.readBlocks(missing);
    let m = 0;
    let touched = 0;
    for (let i = 0; i < n; i++) {
      const b = s.block[i];
      if (b < 0) continue;
      const first = firsts[b];
      if (kept.has(b)) {
        s.set(i, kept.chunks[kept.chunkOf[b]], kept.keysAt[b], kept.kb[b], kept.ib[b], kept.count[b]);
      } else {
        // blocks come in ascending order, and so do the ones read
        while (missing[m] !== b) m++;
        s.set(i, r.bytes[m], r.keysAt[m], r.kb[m], r.ib[m], r.count[m]);
      }
      const count = s.count[i];
      const delta = sortedKeys[i] - first;
      s.delta[i] = delta;
      const span = (b + 1 < firsts.length ? firsts[b + 1] : KEY_SPACE) - first;
      const guess = guessOf(delta, span, count);
      s.guess[i] = guess;
      touched += touchPair(s.bytes[i], s.keysAt[i], s.kb[i], s.ib[i], count, guess);
    }
    this.touched = touched;
    for (let i = 0; i < n; i++) {
      if (s.block[i] < 0) continue;
      forEachIdFrom(s.bytes[i], s.keysAt[i], s.kb[i], s.ib[i], s.count[i], s.delta[i], s.guess[i], onId);
    }
    // the references to blocks not kept go with the call
    s.bytes.length = 0;
    r.bytes.length = 0;
  }

  /** Reads the blocks of these indexes (ascending) into `read`, keeping those the budget has room for. */
  private readBlocks(indexes: readonly number[]): void {
    const read = this.read.reserve(indexes.length);
    const { firsts } = this;
    const header = this.header;
    const wanted = indexes.map((b) => firsts[b]);
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
        const length = readHeader(blobs, at, header);
        const b = indexes[w];
        if (length <= this.budget.left) {
          this.kept.keep(b, blobs, at, length, header);
          this.budget.left -= length;
        }
        const keptAt = this.kept.has(b);
        const bytes = keptAt ? this.kept.chunks[this.kept.chunkOf[b]] : blobs;
        read.set(w, bytes, keptAt ? this.kept.keysAt[b] : at + BLOCK_HEADER, header.kb, header.ib, header.count);
        at += length;
      }
      if (at !== blobs.length) throw new Error('a key block of the state file is damaged');
    }
  }
}
