/** A blocked Bloom filter over lookup keys, and its pieces in the file: "surely not stored" for most absent keys. */
import type { Database } from 'better-sqlite3';
import { withChecksum, withoutChecksum } from './checksum.js';
import { metaNumber, setMetaValue } from './meta-values.js';
import { META_KEYS } from './schema.js';

// a block is one 64-byte cache line: a test or an add touches one line of memory
const BLOCK_WORDS = 16;
const BLOCK_BYTES = BLOCK_WORDS * 4;
// bits set per key (part of the stored format): at 8 bits per key about 2% of absent keys pass
const PROBES = 6;
// the stored bytes are little-endian words whatever machine wrote them
const BIG_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 0;
// not part of the format: a false positive costs only the block read a lookup would make without a filter
const BITS_PER_KEY = 8;

/** Every key added answers true; an absent key false but for a small share. Sized for a capacity. */
export class KeyFilter {
  /** `count`: the keys added so far (repeats counted). */
  constructor(
    readonly blocks: number,
    readonly words = new Uint32Array(blocks * BLOCK_WORDS),
    public count = 0,
  ) {}

  static forCapacity(capacity: number): KeyFilter {
    return new KeyFilter(Math.ceil((Math.max(1, capacity) * BITS_PER_KEY) / (BLOCK_WORDS * 32)));
  }

  get capacity(): number {
    return Math.floor((this.blocks * BLOCK_WORDS * 32) / BITS_PER_KEY);
  }

  add(key: number): void {
    const lo = (key % 4294967296) >>> 0;
    const hi = Math.floor(key / 4294967296);
    const h1 = mix(lo ^ Math.imul(hi, 0x9e3779b1));
    const h2 = mix(h1 ^ hi ^ 0x85ebca6b);
    const h3 = mix(h2 ^ lo);
    const base = Math.floor((h1 / 4294967296) * this.blocks) * BLOCK_WORDS;
    const w = this.words;
    // PROBES 9-bit positions inside the block's 512 bits: half from each of two hashes
    for (let i = 0; i < PROBES / 2; i++) {
      const a = (h2 >>> (i * 9)) & 511;
      const b = (h3 >>> (i * 9)) & 511;
      w[base + (a >>> 5)] |= 1 << (a & 31);
      w[base + (b >>> 5)] |= 1 << (b & 31);
    }
    this.count++;
  }

  /** add's hashes, inlined here too: this is every lookup's first step. */
  mayHave(key: number): boolean {
    const lo = (key % 4294967296) >>> 0;
    const hi = Math.floor(key / 4294967296);
    const h1 = mix(lo ^ Math.imul(hi, 0x9e3779b1));
    const h2 = mix(h1 ^ hi ^ 0x85ebca6b);
    const h3 = mix(h2 ^ lo);
    const base = Math.floor((h1 / 4294967296) * this.blocks) * BLOCK_WORDS;
    const w = this.words;
    for (let i = 0; i < PROBES / 2; i++) {
      const a = (h2 >>> (i * 9)) & 511;
      const b = (h3 >>> (i * 9)) & 511;
      if ((w[base + (a >>> 5)] & (1 << (a & 31))) === 0) return false;
      if ((w[base + (b >>> 5)] & (1 << (b & 31))) === 0) return false;
    }
    return true;
  }
}

/** A 32-bit finalizer (murmur3's): spreads every input bit over the output. */
function mix(x: number): number {
  let h = x >>> 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

// the filter is stored in pieces of this many bytes, each with its checksum
const PIECE_BYTES = 1 << 20;

/** The stored filter when it holds every key up to `upto`; null when none does or a piece fails its checksum. */
export function readKeyFilter(db: Database, upto: number): KeyFilter | null {
  if (upto === 0) return new KeyFilter(1);
  if (metaNumber(db, META_KEYS.filterUpto) !== upto) return null;
  const pieces: Buffer[] = [];
  for (const stored of db.prepare('SELECT bits FROM key_filter ORDER BY piece').pluck().all() as Buffer[]) {
    const bits = withoutChecksum(stored);
    if (bits === null) return null;
    pieces.push(bits);
  }
  const bytes = Buffer.concat(pieces);
  const blocks = metaNumber(db, META_KEYS.filterBlocks) ?? 0;
  if (!(blocks >= 1) || bytes.length !== blocks * BLOCK_BYTES) return null;
  const words = new Uint32Array(blocks * BLOCK_WORDS);
  new Uint8Array(words.buffer).set(BIG_ENDIAN ? bytes.swap32() : bytes);
  return new KeyFilter(blocks, words, metaNumber(db, META_KEYS.filterCount) ?? 0);
}

/** Writes the filter as the one holding every key up to `upto`, in pieces, inside the caller's transaction. */
export function writeKeyFilter(db: Database, filter: KeyFilter, upto: number): void {
  db.prepare('DELETE FROM key_filter').run();
  const insert = db.prepare('INSERT INTO key_filter (piece, bits) VALUES (?, ?)');
  const { words } = filter;
  const bytes = Buffer.from(words.buffer, words.byteOffset, words.byteLength);
  const stored = BIG_ENDIAN ? Buffer.from(bytes).swap32() : bytes;
  for (let at = 0; at < stored.length; at += PIECE_BYTES) {
    insert.run(at / PIECE_BYTES, withChecksum(stored.subarray(at, at + PIECE_BYTES)));
  }
  setMetaValue(db, META_KEYS.filterBlocks, filter.blocks);
  setMetaValue(db, META_KEYS.filterCount, filter.count);
  setMetaValue(db, META_KEYS.filterUpto, upto);
}
