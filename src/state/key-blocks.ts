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
  // only a key shared by that many hashes could make such a block
  if (n > 0xffff) throw new Error(`a key block cannot hold ${n} pairs`);
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
    writeUnsigned(blob, BLOCK_HEADER + i * kw, kw, keys[from + i] - first);
    writeUnsigned(blob, idsAt + i * iw, iw, ids[from + i]);
  }
  return blob;
}

// Byte by byte rather than Buffer's readUIntLE and writeUIntLE, and in 32-bit integer steps rather than
// floating-point division: a merge reads and writes every pair of a level. Values are below 2^48.
function readUnsigned(bytes: Uint8Array, at: number, width: number): number {
  let low = 0;
  const lowBytes = Math.min(width, 4);
  for (let j = lowBytes - 1; j >= 0; j--) low = ((low << 8) | bytes[at + j]) >>> 0;
  if (width <= 4) return low;
  let high = 0;
  for (let j = width - 1; j >= 4; j--) high = (high << 8) | bytes[at + j];
  return high * 4_294_967_296 + low;
}

function writeUnsigned(bytes: Uint8Array, at: number, width: number, value: number): void {
  let low = value >>> 0;
  let high = (value - low) / 4_294_967_296;
  const lowBytes = Math.min(width, 4);
  for (let j = 0; j < lowBytes; j++) {
    bytes[at + j] = low & 255;
    low >>>= 8;
  }
  for (let j = 4; j < width; j++) {
    bytes[at + j] = high & 255;
    high >>>= 8;
  }
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
    return this.first + readUnsigned(this.blob, BLOCK_HEADER + i * this.kw, this.kw);
  }

  id(i: number): number {
    return readUnsigned(this.blob, this.idsAt + i * this.iw, this.iw);
  }

  /** Every pair at once, into keys[0..count) and ids[0..count) (what a walk of a whole level reads). */
  decodeInto(keys: Float64Array, ids: Float64Array): void {
    const { blob, kw, iw, first } = this;
    for (let i = 0, at = BLOCK_HEADER; i < this.count; i++, at += kw) keys[i] = first + readUnsigned(blob, at, kw);
    for (let i = 0, at = this.idsAt; i < this.count; i++, at += iw) ids[i] = readUnsigned(blob, at, iw);
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
      if (readUnsigned(this.blob, BLOCK_HEADER + mid * this.kw, this.kw) < delta) lo = mid + 1;
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
  // the pending pairs, from index 0 (room for a block and more: they grow for a key shared by many pairs)
  private keys = new Float64Array(BLOCK_BYTES);
  private ids = new Float64Array(BLOCK_BYTES);
  private n = 0;
  // the widths the pending pairs need, and the values from which each grows
  private kw = 1;
  private iw = 1;
  private keyLimit = 256;
  private idLimit = 256;

  constructor(private readonly onBlock: (first: number, blob: Buffer) => void) {}

  get pending(): number {
    return this.n;
  }

  push(key: number, id: number): void {
    if (this.n === 0) {
      this.setWidths(1, widthOf(id));
      this.append(key, id);
      return;
    }
    const delta = key - this.keys[0];
    // widths only grow within a block: a value below the current limit needs no more
    const kw = delta < this.keyLimit ? this.kw : widthOf(delta);
    const iw = id < this.idLimit ? this.iw : widthOf(id);
    if (BLOCK_HEADER + (this.n + 1) * (kw + iw) > BLOCK_BYTES && this.cut(key)) {
      // the pairs kept for the next block have their widths now: measure the pair against them
      this.push(key, id);
      return;
    }
    this.setWidths(kw, iw);
    this.append(key, id);
  }

  /** Gives out the pending pairs as a last, possibly short, block. */
  flush(): void {
    if (this.n > 0) this.give(this.n);
  }

  private append(key: number, id: number): void {
    if (this.n === this.keys.length) {
      const keys = new Float64Array(2 * this.n);
      const ids = new Float64Array(2 * this.n);
      keys.set(this.keys);
      ids.set(this.ids);
      this.keys = keys;
      this.ids = ids;
    }
    this.keys[this.n] = key;
    this.ids[this.n] = id;
    this.n++;
  }

  private setWidths(kw: number, iw: number): void {
    if (kw !== this.kw) {
      this.kw = kw;
      this.keyLimit = 256 ** kw;
    }
    if (iw !== this.iw) {
      this.iw = iw;
      this.idLimit = 256 ** iw;
    }
  }

  /**
   * Before `next` is pushed into a full block: gives out the pending pairs up to the last run of one key, and
   * keeps the rest (with the widths they need) for the next block. False when the pending pairs are all of
   * next's key: a block of one key only (two hashes share it) grows past the size instead.
   */
  private cut(next: number): boolean {
    let end = this.n;
    // the full block ends with next's key: its pairs go to the next block with it
    while (end > 0 && this.keys[end - 1] === next) end--;
    if (end === 0) return false;
    this.give(end);
    return true;
  }

  /** Gives out pairs [0, end) as a block and moves the rest to the front. */
  private give(end: number): void {
    this.onBlock(this.keys[0], encodeBlock(this.keys, this.ids, 0, end));
    this.keys.copyWithin(0, end, this.n);
    this.ids.copyWithin(0, end, this.n);
    this.n -= end;
    let maxId = 0;
    for (let i = 0; i < this.n; i++) if (this.ids[i] > maxId) maxId = this.ids[i];
    this.kw = 1;
    this.iw = 1;
    this.keyLimit = 256;
    this.idLimit = 256;
    if (this.n > 0) this.setWidths(widthOf(this.keys[this.n - 1] - this.keys[0]), widthOf(maxId));
  }
}
