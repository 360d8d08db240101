/** The format of a key block: sorted (lookup key, entry id) pairs packed in fixed widths, and how blocks are cut. */

/**
 * A block's row is (first_k, keys): first_k is its first key (the row id, so a lookup is one descent), and the
 * blob holds
 *   byte 0      the bytes per key, kw (1 to 6): each key is stored as its difference from first_k
 *   byte 1      the bytes per id, iw (1 to 6)
 *   bytes 2-3   the number of pairs n, little-endian
 *   n x kw      the keys' differences, ascending, little-endian
 *   n x iw      the ids, in the same order (ascending within a key), little-endian
 * Fixed widths let a lookup search the block without decoding it; per-block widths keep a block of close keys
 * small (a key of a big file differs from its block's first by far fewer bits than it has).
 */
export const BLOCK_HEADER = 4;
/**
 * The most a block's blob takes: four blocks fit a 4 KiB page of SQLite's, so that a lookup reads one page, and a
 * lookup copies out about a thousand bytes per key it asks (bigger blocks made random lookups slower, smaller
 * ones no faster, and each block costs its row's overhead).
 */
export const BLOCK_BYTES = 1_000;
// widths up to 6 bytes: keys are 47 bits, ids below 2^48
const MAX_WIDTH = 6;

/** The bytes an unsigned integer needs (at least 1). */
export function widthOf(value: number): number {
  let width = 1;
  let limit = 256;
  while (value >= limit && width < MAX_WIDTH) {
    width++;
    limit *= 256;
  }
  return width;
}

/** The pairs keys[from..to) and ids[from..to) (sorted by key, then id) as a block's blob. */
export function encodeBlock(keys: ArrayLike<number>, ids: ArrayLike<number>, from: number, to: number): Buffer {
  const n = to - from;
  const first = keys[from];
  let maxId = 0;
  for (let i = from; i < to; i++) if (ids[i] > maxId) maxId = ids[i];
  const kw = widthOf(keys[to - 1] - first);
  const iw = widthOf(maxId);
  const blob = Buffer.allocUnsafe(BLOCK_HEADER + n * (kw + iw));
  blob[0] = kw;
  blob[1] = iw;
  blob.writeUInt16LE(n, 2);
  const idsAt = BLOCK_HEADER + n * kw;
  for (let i = 0; i < n; i++) {
    blob.writeUIntLE(keys[from + i] - first, BLOCK_HEADER + i * kw, kw);
    blob.writeUIntLE(ids[from + i], idsAt + i * iw, iw);
  }
  return blob;
}

/** The length of the blob of the block that starts at `at` of `bytes` (blocks read one after the other). */
export function blockLength(bytes: Buffer, at: number): number {
  if (at + BLOCK_HEADER > bytes.length) throw new Error('a key block of the state file is cut short');
  return BLOCK_HEADER + bytes.readUInt16LE(at + 2) * (bytes[at] + bytes[at + 1]);
}

/** Reads one block's pairs in place. */
export class KeyBlock {
  readonly count: number;
  private readonly kw: number;
  private readonly iw: number;
  private readonly idsAt: number;

  constructor(
    readonly first: number,
    private readonly blob: Buffer,
  ) {
    this.kw = blob[0];
    this.iw = blob[1];
    this.count = blob.readUInt16LE(2);
    this.idsAt = BLOCK_HEADER + this.count * this.kw;
    if (
      this.kw < 1 ||
      this.kw > MAX_WIDTH ||
      this.iw < 1 ||
      this.iw > MAX_WIDTH ||
      blob.length !== this.idsAt + this.count * this.iw
    ) {
      throw new Error(`a key block of the state file is damaged (first key ${first})`);
    }
  }

  key(i: number): number {
    return this.first + this.blob.readUIntLE(BLOCK_HEADER + i * this.kw, this.kw);
  }

  id(i: number): number {
    return this.blob.readUIntLE(this.idsAt + i * this.iw, this.iw);
  }

  /** The block's last key. */
  get last(): number {
    return this.key(this.count - 1);
  }

  /** Gives the id of every pair with this key. */
  forEachId(key: number, onId: (id: number) => void): void {
    const delta = key - this.first;
    let lo = 0;
    let hi = this.count;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.blob.readUIntLE(BLOCK_HEADER + mid * this.kw, this.kw) < delta) lo = mid + 1;
      else hi = mid;
    }
    for (let i = lo; i < this.count && this.key(i) === key; i++) onId(this.id(i));
  }
}

/**
 * Cuts a sorted stream of pairs into full blocks: pairs are pushed in order, and each block is given out as soon
 * as the next pair would not fit, never between two pairs of one key (two hashes may share a key, and a lookup
 * reads one block). What is left at the end is given by flush.
 */
export class BlockWriter {
  private keys: number[] = [];
  private ids: number[] = [];
  // where the pending pairs start in keys and ids (given-out pairs before it are dropped now and then)
  private start = 0;
  private maxId = 0;

  constructor(private readonly onBlock: (first: number, blob: Buffer) => void) {}

  get pending(): number {
    return this.keys.length - this.start;
  }

  push(key: number, id: number): void {
    const n = this.keys.length - this.start;
    if (n > 0) {
      const kw = widthOf(key - this.keys[this.start]);
      const iw = widthOf(Math.max(this.maxId, id));
      if (BLOCK_HEADER + (n + 1) * (kw + iw) > BLOCK_BYTES) this.cut(key);
    }
    this.keys.push(key);
    this.ids.push(id);
    if (id > this.maxId) this.maxId = id;
  }

  /** Gives out the pending pairs as a last, possibly short, block. */
  flush(): void {
    if (this.keys.length > this.start) this.give(this.keys.length);
    this.keys = [];
    this.ids = [];
    this.start = 0;
    this.maxId = 0;
  }

  /** Before `next` is pushed into a full block: gives out the pending pairs up to the last run of one key. */
  private cut(next: number): void {
    let end = this.keys.length;
    // the full block ends with next's key: its pairs go to the next block with it
    while (end > this.start && this.keys[end - 1] === next) end--;
    // a block of one key only (two hashes share it) grows past the size instead
    if (end === this.start) return;
    this.give(end);
    if (this.start > 65_536) {
      this.keys = this.keys.slice(this.start);
      this.ids = this.ids.slice(this.start);
      this.start = 0;
    }
    this.maxId = 0;
    for (let i = this.start; i < this.ids.length; i++) if (this.ids[i] > this.maxId) this.maxId = this.ids[i];
  }

  private give(end: number): void {
    this.onBlock(this.keys[this.start], encodeBlock(this.keys, this.ids, this.start, end));
    this.start = end;
  }
}
