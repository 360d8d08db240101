/** The format of a key block: sorted (lookup key, entry id) pairs packed in fixed widths, and how blocks are cut. */
import { ChecksumError, checksumOf } from './checksum.js';

/**
 * A block's row is (first_k, keys): first_k is its first key (the row id, so a lookup is one descent), and the
 * blob holds a 4-byte header, then n keys, then n ids. Each key is stored as its difference from first_k, all
 * keys in one width and all ids in another, whole bytes each, so that a lookup searches the block without
 * decoding it; per-block widths keep a block of close keys small (a key of a big file differs from its block's
 * first by far fewer bits than it has). The blob:
 *
 *     byte 0      0x50 + the bytes per key difference, kb (1 to 6)
 *     byte 1      the bytes per id, ib (1 to 6)
 *     bytes 2-3   the number of pairs n, little-endian
 *     then        n key differences of kb bytes (ascending), then n ids of ib bytes (in the same order, ascending
 *                 within a key), each little-endian
 *     last 4      the CRC-32 of every byte before it, little-endian (checksum.ts): checked as a block is read
 *
 * so the blob takes 4 + n * (kb + ib) + 4 bytes.
 */
export const BLOCK_HEADER = 4;
/** The checksum at the end of a block's blob. */
const BLOCK_CHECK = 4;
/**
 * The most a block's blob takes: eight blocks fit an 8 KiB page of SQLite's, so that a lookup reads one page, and a
 * lookup copies out about a thousand bytes per key it asks (bigger blocks made random lookups slower, smaller
 * ones no faster, and each block costs its row's overhead).
 */
export const BLOCK_BYTES = 1_000;
/** The most pairs a block of the size holds (every pair takes at least 2 bytes), but for a key shared by more. */
export const MAX_BLOCK_PAIRS = Math.floor((BLOCK_BYTES - BLOCK_HEADER) / 2);
// byte 0 of a header is this plus the key bytes
const FORMAT = 0x50;
// widths up to 6 bytes: keys are 47 bits, ids below 2^48
const MAX_BYTES = 6;
// the bytes of a block's pairs within BLOCK_BYTES
const DATA_BYTES = BLOCK_BYTES - BLOCK_HEADER - BLOCK_CHECK;

/** The bytes an unsigned integer below 2^48 needs (at least 1). */
export function bytesOf(value: number): number {
  let n = 1;
  for (let top = 256; value >= top && n < MAX_BYTES; top *= 256) n++;
  return n;
}

/** The pairs keys[from..to) and ids[from..to) (sorted by key, then id) as a block's blob, its checksum at the end. */
export function encodeBlock(keys: ArrayLike<number>, ids: ArrayLike<number>, from: number, to: number): Buffer {
  const n = to - from;
  // only a key shared by that many hashes could make such a block
  if (n > 0xffff) throw new Error(`a key block cannot hold ${n} pairs`);
  const first = keys[from];
  let maxId = 0;
  for (let i = from; i < to; i++) if (ids[i] > maxId) maxId = ids[i];
  const kb = bytesOf(keys[to - 1] - first);
  const ib = bytesOf(maxId);
  const length = lengthOf(n, kb, ib);
  const blob = Buffer.allocUnsafe(length);
  blob[0] = FORMAT + kb;
  blob[1] = ib;
  blob.writeUInt16LE(n, 2);
  const idsAt = BLOCK_HEADER + n * kb;
  for (let i = 0; i < n; i++) {
    blob.writeUIntLE(keys[from + i] - first, BLOCK_HEADER + i * kb, kb);
    blob.writeUIntLE(ids[from + i], idsAt + i * ib, ib);
  }
  blob.writeUInt32LE(checksumOf(blob.subarray(0, length - BLOCK_CHECK)), length - BLOCK_CHECK);
  return blob;
}

/** The little-endian value of `width` bytes (up to 6) at `at` of `bytes`. */
function readLE(bytes: Uint8Array, at: number, width: number): number {
  let value = 0;
  for (let i = at + width - 1; i >= at; i--) value = value * 256 + bytes[i];
  return value;
}

/** The bytes per key difference that a header's first two bytes (b0, b1) say: 0 when they are wrong (damage). */
function keyBytesOf(b0: number, b1: number): number {
  return b0 > FORMAT && b0 <= FORMAT + MAX_BYTES && b1 >= 1 && b1 <= MAX_BYTES ? b0 - FORMAT : 0;
}

/** The bytes of a block of `count` pairs of these widths in bytes. */
function lengthOf(count: number, kb: number, ib: number): number {
  return BLOCK_HEADER + count * (kb + ib) + BLOCK_CHECK;
}

/** Throws ChecksumError unless the blob of `length` bytes at `at` of `bytes` ends with the checksum of the rest. */
function checkBlock(bytes: Buffer, at: number, length: number): void {
  const end = at + length - BLOCK_CHECK;
  if (checksumOf(bytes.subarray(at, end)) !== bytes.readUInt32LE(end)) throw new ChecksumError('a key block');
}

/** One block of a level walked whole (a merge reads every pair); its header and checksum are checked as it is made. */
export class KeyBlock {
  private readonly header: BlockHeader = { kb: 0, ib: 0, count: 0 };

  constructor(
    readonly first: number,
    readonly blob: Buffer,
  ) {
    if (readHeader(blob, 0, this.header) !== blob.length) throw new ChecksumError('a key block');
  }

  get count(): number {
    return this.header.count;
  }

  /** Every pair at once, into keys[0..count) and ids[0..count). */
  decodeInto(keys: Float64Array, ids: Float64Array): void {
    const { blob, first } = this;
    const { kb, ib, count } = this.header;
    for (let i = 0, at = BLOCK_HEADER; i < count; i++, at += kb) keys[i] = first + readLE(blob, at, kb);
    for (let i = 0, at = BLOCK_HEADER + count * kb; i < count; i++, at += ib) ids[i] = readLE(blob, at, ib);
  }
}

/** A block's widths and pair count, as read from its header by `readHeader`. */
export interface BlockHeader {
  /** Bytes per key difference and per id. */
  kb: number;
  ib: number;
  count: number;
}

/**
 * Reads the header of the block whose blob starts at byte `at` of `bytes` (blobs read one after the other) into
 * `into`, and gives back the blob's length. Throws ChecksumError when the header is wrong, the blob would run past
 * the bytes, or its checksum does not match.
 */
export function readHeader(bytes: Buffer, at: number, into: BlockHeader): number {
  if (at + BLOCK_HEADER > bytes.length) throw new ChecksumError('a key block');
  const kb = keyBytesOf(bytes[at], bytes[at + 1]);
  if (kb === 0) throw new ChecksumError('a key block');
  const ib = bytes[at + 1];
  const count = bytes[at + 2] | (bytes[at + 3] << 8);
  const length = lengthOf(count, kb, ib);
  if (at + length > bytes.length) throw new ChecksumError('a key block');
  checkBlock(bytes, at, length);
  into.kb = kb;
  into.ib = ib;
  into.count = count;
  return length;
}

/**
 * Where a key `delta` above a block's first key most likely is among its `count` pairs, when the block's keys lie
 * in [0, span) above the first: lookup keys are hash bits, spread evenly, so a guess by proportion lands within a
 * few pairs, and the search from it (forEachIdFrom) reads one or two cache lines of the block instead of the
 * several a binary search over the whole block touches.
 */
export function guessOf(delta: number, span: number, count: number): number {
  const guess = Math.floor((delta / span) * count);
  return guess <= 0 ? 0 : guess >= count ? count - 1 : guess;
}

/**
 * Reads the bytes that pair `i`'s key and id start in (a block laid out as forEachIdFrom says) and gives back their
 * sum, which is of no use but keeps the reads: done for many keys before any is searched, the cache misses of their
 * blocks overlap instead of coming one after the other.
 */
export function touchPair(bytes: Uint8Array, keysAt: number, kb: number, ib: number, count: number, i: number): number {
  return bytes[keysAt + i * kb] + bytes[keysAt + count * kb + i * ib];
}

/**
 * Gives the id of every pair whose key difference is `delta`, in a block whose `count` keys of kb bytes start at
 * byte `keysAt` of `bytes` (its ids, of ib bytes, after them), searching from pair `guess`: steps doubling away
 * from it until they pass the key, then halving. A good guess costs a few reads next to each other, a bad one
 * (keys crowded in part of the range) no more than twice a binary search.
 */
export function forEachIdFrom(
  bytes: Uint8Array,
  keysAt: number,
  kb: number,
  ib: number,
  count: number,
  delta: number,
  guess: number,
  onId: (id: number) => void,
): void {
  // the first pair whose key is at or above delta lies in [lo, hi]
  let lo: number;
  let hi: number;
  if (readLE(bytes, keysAt + guess * kb, kb) < delta) {
    lo = guess + 1;
    let step = 1;
    while (lo + step - 1 < count && readLE(bytes, keysAt + (lo + step - 1) * kb, kb) < delta) {
      lo += step;
      step *= 2;
    }
    hi = Math.min(count, lo + step - 1);
  } else {
    hi = guess;
    let step = 1;
    while (hi - step >= 0 && readLE(bytes, keysAt + (hi - step) * kb, kb) >= delta) {
      hi -= step;
      step *= 2;
    }
    lo = Math.max(0, hi - step + 1);
  }
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (readLE(bytes, keysAt + mid * kb, kb) < delta) lo = mid + 1;
    else hi = mid;
  }
  const idsAt = keysAt + count * kb;
  for (let i = lo; i < count && readLE(bytes, keysAt + i * kb, kb) === delta; i++) {
    onId(readLE(bytes, idsAt + i * ib, ib));
  }
}

/**
 * Cuts a sorted stream of pairs into full blocks: pairs are pushed in order, and each
 * block is given out as soon as the next pair would not fit, never between two pairs of one key (two hashes may
 * share a key, and a lookup reads one block). What is left at the end is given by flush.
 */
export class BlockWriter {
  // the pending pairs, from index 0 (room for a block and more: they grow for a key shared by many pairs)
  private keys = new Float64Array(MAX_BLOCK_PAIRS);
  private ids = new Float64Array(MAX_BLOCK_PAIRS);
  private n = 0;
  // the widths in bytes the pending pairs need, and the values from which each grows
  private kb = 1;
  private ib = 1;
  private keyLimit = 256;
  private idLimit = 256;

  constructor(private readonly onBlock: (first: number, blob: Buffer) => void) {}

  get pending(): number {
    return this.n;
  }

  push(key: number, id: number): void {
    if (this.n === 0) {
      this.setWidths(1, bytesOf(id));
      this.append(key, id);
      return;
    }
    const delta = key - this.keys[0];
    // widths only grow within a block: a value below the current limit needs no more
    const kb = delta < this.keyLimit ? this.kb : bytesOf(delta);
    const ib = id < this.idLimit ? this.ib : bytesOf(id);
    if ((this.n + 1) * (kb + ib) > DATA_BYTES && this.cut(key)) {
      // the pairs kept for the next block have their widths now: measure the pair against them
      this.push(key, id);
      return;
    }
    this.setWidths(kb, ib);
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

  private setWidths(kb: number, ib: number): void {
    if (kb !== this.kb) {
      this.kb = kb;
      this.keyLimit = 256 ** kb;
    }
    if (ib !== this.ib) {
      this.ib = ib;
      this.idLimit = 256 ** ib;
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
    this.setWidths(1, 1);
    if (this.n > 0) this.setWidths(bytesOf(this.keys[this.n - 1] - this.keys[0]), bytesOf(maxId));
  }
}
