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

/**
 * keyOf for a hash whose first 8 characters are text[start, start + 8) (the hash may be longer), without the rest
 * of it; -1 when those are not all base64 (its key then comes from the whole hash: ask keyOf).
 */
export function keyOfPrefix(code: number, text: string, start: number): number {
  const bits = base64Bits(text, start);
  return bits < 0 ? -1 : Math.floor(bits / 4) * 2 + code;
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
  const b = createHash('sha256').update(hash).digest();
  return b[0] * 2 ** 38 + b[1] * 2 ** 30 + b[2] * 2 ** 22 + b[3] * 2 ** 14 + b[4] * 2 ** 6 + (b[5] >>> 2);
}
