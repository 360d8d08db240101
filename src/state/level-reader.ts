/** Lookups of keys in one level of the lookup index, with the blocks read kept in memory while a budget has room. */
import type { Database, Statement } from 'better-sqlite3';
import { idList } from './id-lists.js';
import { BLOCK_HEADER, type BlockHeader, forEachIdFrom, guessOf, readHeader, touchPair } from './key-blocks.js';
import type { KeyLevel } from './key-levels.js';
import { KeptBlocks } from './kept-blocks.js';
import { LIST_PAGE } from './queries.js';

// blocks read per statement by a lookup
const MAX_PAGE = LIST_PAGE;
// lookup keys are below 2^47: the end of the last block's range
const KEY_SPACE = 2 ** 47;

/**
 * What the level readers of one store may keep of their levels' blocks in memory, in bytes: shared by both levels,
 * taken as blocks are kept and given back when a level changes.
 */
export class BlockBudget {
  constructor(public left: number) {}
}

/** Per key of one idsOf call: its block, and where and how to search it. Reused from call to call. */
class Searches {
  block = new Int32Array(0);
  bytes: Uint8Array[] = [];
  keysAt = new Float64Array(0);
  kb = new Uint8Array(0);
  ib = new Uint8Array(0);
  count = new Int32Array(0);
  delta = new Float64Array(0);
  guess = new Int32Array(0);

  /** Room for n keys. */
  reserve(n: number): void {
    if (this.block.length >= n) return;
    this.block = new Int32Array(n);
    this.keysAt = new Float64Array(n);
    this.kb = new Uint8Array(n);
    this.ib = new Uint8Array(n);
    this.count = new Int32Array(n);
    this.delta = new Float64Array(n);
    this.guess = new Int32Array(n);
  }
}

/** The blocks one readBlocks call read, by their place in its list: where each one's pairs are, and its header. */
class ReadBlocks {
  readonly bytes: Uint8Array[];
  readonly keysAt: Float64Array;
  readonly kb: Uint8Array;
  readonly ib: Uint8Array;
  readonly count: Int32Array;

  constructor(n: number) {
    this.bytes = new Array<Uint8Array>(n);
    this.keysAt = new Float64Array(n);
    this.kb = new Uint8Array(n);
    this.ib = new Uint8Array(n);
    this.count = new Int32Array(n);
  }

  set(w: number, bytes: Uint8Array, keysAt: number, header: BlockHeader): void {
    this.bytes[w] = bytes;
    this.keysAt[w] = keysAt;
    this.kb[w] = header.kb;
    this.ib[w] = header.ib;
    this.count[w] = header.count;
  }
}

/**
 * Looks keys up in a level. The reader keeps the level's first keys (one number per block) in memory, finds the
 * block of each key there, and reads the blocks it needs in IN (...) lists by first key: one statement per list
 * instead of a descent per key. The blocks it reads it keeps while the budget has room: keys are hashes, so random
 * lookups of stored keys ask for every block of a big level, and a block kept saves one of the two reads from the
 * file each such lookup costs (the other is its entry's). Both are dropped when the level may have changed
 * (`version`: the levels' marks in meta, which every merge moves), or when the store forgets what it read (`forget`,
 * after a failed transaction).
 *
 * A lookup of many keys goes in three passes over them: each key's block; each key's likely place in its block
 * (guessOf), reading the bytes there; then the search from that place. The reads of the second pass do not wait
 * on one another, so the cache misses of thousands of blocks overlap; searched one key after the other, each
 * block's misses came in turn.
 */
export class LevelReader {
  /** The first key of each block of the level, ascending. */
  private firsts = new Float64Array(0);
  private kept = new KeptBlocks(0);
  private version = '';
  /** The blocks of a list of first keys, joined in one row in the list's order; prepared on first use. */
  private blocks: Statement | undefined = undefined;
  private readonly searches = new Searches();
  private readonly header: BlockHeader = { kb: 0, ib: 0, count: 0 };
  // the sum of the bytes the second pass reads, kept so that the reads are not left out as unused
  touched = 0;

  constructor(
    private readonly db: Database,
    private readonly level: KeyLevel,
    private readonly budget = new BlockBudget(0),
  ) {}

  /** Drops the first keys and the blocks kept, giving their bytes back to the budget. */
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
      const firsts = this.db.prepare(`SELECT first_k FROM ${this.level} ORDER BY first_k`).pluck().all() as number[];
      this.firsts = Float64Array.from(firsts);
      this.kept = new KeptBlocks(firsts.length);
      this.version = version;
    }
    const n = sortedKeys.length;
    const s = this.searches;
    s.reserve(n);
    const { firsts, kept } = this;
    const missing: number[] = [];
    for (let i = 0; i < n; i++) {
      const b = blockOf(firsts, sortedKeys[i]);
      s.block[i] = b;
      if (b >= 0 && !kept.has(b) && missing[missing.length - 1] !== b) missing.push(b);
    }
    const read = missing.length > 0 ? this.readBlocks(missing) : null;
    let m = 0;
    let touched = 0;
    for (let i = 0; i < n; i++) {
      const b = s.block[i];
      if (b < 0) continue;
      const first = firsts[b];
      let kb: number;
      let count: number;
      if (kept.has(b)) {
        s.bytes[i] = kept.chunks[kept.chunkOf[b]];
        s.keysAt[i] = kept.keysAt[b];
        kb = kept.kb[b];
        s.ib[i] = kept.ib[b];
        count = kept.count[b];
      } else {
        // blocks come in ascending order, and so do the ones read
        while (missing[m] !== b) m++;
        const r = read as ReadBlocks;
        s.bytes[i] = r.bytes[m];
        s.keysAt[i] = r.keysAt[m];
        kb = r.kb[m];
        s.ib[i] = r.ib[m];
        count = r.count[m];
      }
      s.kb[i] = kb;
      s.count[i] = count;
      const delta = sortedKeys[i] - first;
      s.delta[i] = delta;
      const span = (b + 1 < firsts.length ? firsts[b + 1] : KEY_SPACE) - first;
      const guess = guessOf(delta, span, count);
      s.guess[i] = guess;
      touched += touchPair(s.bytes[i], s.keysAt[i], kb, s.ib[i], count, guess);
    }
    this.touched = touched;
    for (let i = 0; i < n; i++) {
      if (s.block[i] < 0) continue;
      forEachIdFrom(s.bytes[i], s.keysAt[i], s.kb[i], s.ib[i], s.count[i], s.delta[i], s.guess[i], onId);
    }
    // the references to blocks not kept go with the call
    s.bytes.length = 0;
  }

  /**
   * Reads the blocks of these indexes (ascending) from the file, in order, keeping those the budget has room for;
   * gives where each one's pairs are, kept or not.
   */
  private readBlocks(indexes: readonly number[]): ReadBlocks {
    const read = new ReadBlocks(indexes.length);
    const { firsts } = this;
    const header = this.header;
    const wanted = indexes.map((b) => firsts[b]);
    this.blocks ??= this.db
      .prepare(
        `SELECT count(*), CAST(group_concat(b.keys, '') AS BLOB) FROM json_each(?) AS j ` +
          `CROSS JOIN ${this.level} AS b ON b.first_k = j.value`,
      )
      .raw();
    for (let start = 0; start < wanted.length; start += MAX_PAGE) {
      const count = Math.min(MAX_PAGE, wanted.length - start);
      // one row: the blocks' blobs one after the other, in first-key order (each says its own length)
      const [found, blobs] = this.blocks.get(idList(wanted.slice(start, start + count))) as [number, Buffer | null];
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
          read.set(w, this.kept.chunks[this.kept.chunkOf[b]], this.kept.keysAt[b], header);
        } else read.set(w, blobs, at + BLOCK_HEADER, header);
        at += length;
      }
      if (at !== blobs.length) throw new Error('a key block of the state file is damaged');
    }
    return read;
  }
}

/** The index of the block that may hold `key`: the last whose first key is at or below it (-1: below them all). */
function blockOf(firsts: Float64Array, key: number): number {
  let lo = 0;
  let hi = firsts.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (firsts[mid] <= key) lo = mid + 1;
    else hi = mid;
  }
  return lo - 1;
}
