/** The lookup key of an entry: an integer made of the first bits of its hash and its DII type. */
import { createHash } from 'node:crypto';
import type { DiiType } from '../identity/index.js';
import { TYPE_CODE } from './schema.js';

// the value of each base64 character (the standard alphabet only), -1 for any other character
const SEXTET = new Int8Array(128).fill(-1);
for (const [i, c] of [...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'].entries()) {
  SEXTET[c.charCodeAt(0)] = i;
}

/**
 * 46 bits of the hash and one bit of type: a non-negative integer that SQLite stores in 6 bytes and a JS number
 * holds exactly. A base64 hash (every SHA-256 the tool stores) gives its first 6 bytes; any other string gives
 * the first bytes of its own SHA-256. Different hashes may share a key: every reader compares the stored hash.
 */
export function keyOf(type: DiiType | number, hash: string): number {
  const code = typeof type === 'number' ? type : TYPE_CODE[type];
  return prefixOf(hash) * 2 + code;
}

/** The 48 bits of 8 base64 characters from `start`, or -1 if one of them is not base64. */
function base64Bits(text: string, start: number): number {
  let bits = 0;
  for (let i = start; i < start + 8; i++) {
    const c = text.charCodeAt(i);
    const s = c < 128 ? SEXTET[c] : -1;
    if (s < 0) return -1;
    bits = bits * 64 + s;
  }
  return bits;
}

/** The first 46 bits of the bytes a hash stands for, read from its first 8 base64 characters (48 bits) directly. */
function prefixOf(hash: string): number {
  if (hash.length >= 8) {
    const bits = base64Bits(hash, 0);
    if (bits >= 0) return Math.floor(bits / 4);
  }
  return prefixOfBytes(createHash('sha256').update(hash).digest(), 0);
}

/** keyOf for a hash kept as its bytes (stored-bytes.ts), from the 6 bytes at `start` of `bytes`. */
export function keyOfBytes(code: number, bytes: Uint8Array, start: number): number {
  return prefixOfBytes(bytes, start) * 2 + code;
}

/** The first 46 bits of the 6 bytes at `s`. */
function prefixOfBytes(b: Uint8Array, s: number): number {
  return (
    b[s] * 2 ** 38 + b[s + 1] * 2 ** 30 + b[s + 2] * 2 ** 22 + b[s + 3] * 2 ** 14 + b[s + 4] * 2 ** 6 + (b[s + 5] >>> 2)
  );
}
