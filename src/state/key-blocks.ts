/** The format of a key block: sorted (lookup key, entry id) pairs packed in fixed widths, and how blocks are cut. */
import { ChecksumError, checksumOf } from './checksum.js';

/**
 * A block's row is (first_k, keys). The blob holds the keys as differences from first_k, all in one width and
 * the ids in another (whole bytes, so a lookup searches the block without decoding it):
 *
 *     byte 0      0x50 + the bytes per key difference, kb (1 to 6)
 *     byte 1      the bytes per id, ib (1 to 6)
 *     bytes 2-3   the number of pairs n, little-endian
 *     then        n key differences of kb bytes (ascending), then n ids of ib bytes (in the same order, ascending
 *                 within a key), each little-endian
 *     last 4      the CRC-32 of every byte before it, little-endian (checksum.ts)
 */
export const BLOCK_HEADER = 4;
const BLOCK_CHECK = 4;
// eight blocks fit an 8 KiB page, so that a lookup reads one page (bigger blocks made random lookups slower)
export const BLOCK_BYTES = 1_000;
const FORMAT = 0x50;
// keys are 47 bits, ids below 2^48
const MAX_BYTES = 6;
const DATA_BYTES = BLOCK_BYTES - BLOCK_HEADER - BLOCK_CHECK;
// the pair count is 2 bytes
const MAX_PAIRS = 0xffff;

/** The bytes an unsigned integer below 2^48 needs (at least 1). */
export function bytesOf(value: number): number {
  let n = 1;
  for (let top = 256; value >= top && n < MAX_BYTES; top *= 256) n++;
  return n;
}

/** The first n pairs of keys and ids (sorted by key, then id) as a block's blob. */
export function encodeBlock(keys: ArrayLike<number>, ids: ArrayLike<number>, n: number): Buffer {
  if (n > MAX_PAIRS) throw new Error(`a key block cannot hold ${n} pairs`);
  const first = keys[0];
  let maxId = 0;
  for (let i = 0; i < n; i++) if (ids[i] > maxId) maxId = ids[i];
  const kb = bytesOf(keys[n - 1] - first);
  const ib = bytesOf(maxId);
  const length = lengthOf(n, kb, ib);
  const blob = Buffer.allocUnsafe(length);
  blob[0] = FORMAT + kb;
  blob[1] = ib;
  blob.writeUInt16LE(n, 2);
  const idsAt = BLOCK_HEADER + n * kb;
  for (let i = 0; i < n; i++) {
    blob.writeUIntLE(keys[i] - first, BLOCK_HEADER + i * kb, kb);
    blob.writeUIntLE(ids[i], idsAt + i * ib, ib);
  }
  blob.writeUInt32LE(checksumOf(blob.subarray(0, length - BLOCK_CHECK)), length - BLOCK_CHECK);
  return blob;
}

function readLE(bytes: Uint8Array, at: number, width: number): number {
  let value = 0;
  for (let i = at + width - 1; i >= at; i--) value = value * 256 + bytes[i];
  return value;
}

function lengthOf(count: number, kb: number, ib: number): number {
  return BLOCK_HEADER + count * (kb + ib) + BLOCK_CHECK;
}

/** One block of a level walked whole (a merge reads every pair), checked as it is made. */
export class KeyBlock {
  readonly count: number;
  private readonly kb: number;
  private readonly ib: number;

  constructor(
    readonly first: number,
    readonly blob: Buffer,
  ) {
    const { kb, ib, count, length } = readHeader(blob, 0);
    if (length !== blob.length) throw new ChecksumError('a key block');
    this.kb = kb;
    this.ib = ib;
    this.count = count;
  }

  keyAt(i: number): number {
    return this.first + readLE(this.blob, BLOCK_HEADER + i * this.kb, this.kb);
  }

  idAt(i: number): number {
    return readLE(this.blob, BLOCK_HEADER + this.count * this.kb + i * this.ib, this.ib);
  }
}

/** A block's bytes per key difference and per id, its pair count, and its blob's length. */
export type BlockHeader = ReturnType<typeof readHeader>;

/**
 * The header of the block at `at` of `bytes`. Throws ChecksumError when the header is wrong, the blob runs past
 * the bytes, or its checksum does not match.
 */
export function readHeader(bytes: Buffer, at: number) {
  const kb = bytes[at] - FORMAT;
  const ib = bytes[at + 1];
  const count = bytes[at + 2] | (bytes[at + 3] << 8);
  const length = lengthOf(count, kb, ib);
  const end = at + length - BLOCK_CHECK;
  if (
    at + BLOCK_HEADER > bytes.length ||
    !(kb >= 1 && kb <= MAX_BYTES && ib >= 1 && ib <= MAX_BYTES) ||
    end + BLOCK_CHECK > bytes.length ||
    checksumOf(bytes.subarray(at, end)) !== bytes.readUInt32LE(end)
  ) {
    throw new ChecksumError('a key block');
  }
  return { kb, ib, count, length };
}

/**
 * Where a key `delta` above a block's first key most likely is among its `count` pairs, keys lying in [0, span):
 * keys are hash bits, spread evenly, so a guess by proportion lands within a few pairs.
 */
export function guessOf(delta: number, span: number, count: number): number {
  const guess = Math.floor((delta / span) * count);
  return guess <= 0 ? 0 : guess >= count ? count - 1 : guess;
}

/**
 * Reads the bytes pair `i` starts in; the sum keeps the reads. Done for many keys before any is searched, the
 * cache misses of their blocks overlap.
 */
export function touchPair(bytes: Uint8Array, keysAt: number, kb: number, ib: number, count: number, i: number): number {
  return bytes[keysAt + i * kb] + bytes[keysAt + count * kb + i * ib];
}

/**
 * Gives the id of every pair whose key difference is `delta`, in a block whose `count` keys of kb bytes start at
 * `keysAt` (its ids after them), walking a pair at a time from pair `guess`: keys are hash bits spread evenly, so
 * the guess is a few pairs off.
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
  let i = guess;
  while (i > 0 && readLE(bytes, keysAt + (i - 1) * kb, kb) >= delta) i--;
  while (i < count && readLE(bytes, keysAt + i * kb, kb) < delta) i++;
  const idsAt = keysAt + count * kb;
  for (; i < count && readLE(bytes, keysAt + i * kb, kb) === delta; i++) onId(readLE(bytes, idsAt + i * ib, ib));
}

/**
 * Cuts a sorted stream of pairs into full blocks, never between two pairs of one key (a lookup reads one block). A
 * pair given twice in a row is kept once.
 */
export class BlockWriter {
  // room for a block of one key shared by the most pairs a block holds (encodeBlock refuses more)
  private readonly keys = new Float64Array(MAX_PAIRS + 1);
  private readonly ids = new Float64Array(MAX_PAIRS + 1);
  private n = 0;
  // the width the pending pairs' ids need (their keys' is their last one's, as keys ascend)
  private ib = 1;

  constructor(private readonly onBlock: (first: number, blob: Buffer) => void) {}

  push(key: number, id: number): void {
    if (this.n > 0 && key === this.keys[this.n - 1] && id === this.ids[this.n - 1]) return;
    const ib = Math.max(this.ib, bytesOf(id));
    if (this.n > 0 && (this.n + 1) * (bytesOf(key - this.keys[0]) + ib) > DATA_BYTES && this.cut(key)) {
      // the pairs kept for the next block have their widths now: measure the pair against them
      this.push(key, id);
      return;
    }
    this.ib = ib;
    this.keys[this.n] = key;
    this.ids[this.n] = id;
    this.n++;
  }

  flush(): void {
    if (this.n > 0) this.give(this.n);
  }

  /**
   * Gives out the pending pairs before the run of `next`'s key, keeping that run for the next block; false when
   * they are all of that key (the block then grows past the size).
   */
  private cut(next: number): boolean {
    let end = this.n;
    while (end > 0 && this.keys[end - 1] === next) end--;
    if (end === 0) return false;
    this.give(end);
    return true;
  }

  private give(end: number): void {
    this.onBlock(this.keys[0], encodeBlock(this.keys, this.ids, end));
    this.keys.copyWithin(0, end, this.n);
    this.ids.copyWithin(0, end, this.n);
    this.n -= end;
    // what is left is none, or one key's run (cut), its ids ascending: the last is the widest
    this.ib = bytesOf(this.n > 0 ? this.ids[this.n - 1] : 0);
  }
}
