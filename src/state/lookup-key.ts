/** The lookup key of an entry: an integer made of the first bits of its hash and its DII type. */
import { createHash } from 'node:crypto';
import type { DiiType } from '../identity/index.js';
import { TYPE_CODE } from './schema.js';

const BASE64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
// the value of each base64 character, -1 for any other
const SEXTET = new Int8Array(128).fill(-1);
for (let i = 0; i < 64; i++) SEXTET[BASE64.charCodeAt(i)] = i;

/**
 * 46 bits of the hash and one of type, which a JS number holds exactly: from a base64 hash's first bytes, or from
 * any other string's own SHA-256. Hashes may share a key: every reader compares the stored hash.
 */
export function keyOf(type: DiiType | number, hash: string): number {
  const code = typeof type === 'number' ? type : TYPE_CODE[type];
  return prefixOf(hash) * 2 + code;
}

/** The first 46 bits of a base64 hash's 8 first characters, or of the SHA-256 of any other string. */
function prefixOf(hash: string): number {
  let bits = 0;
  for (let i = 0; i < 8; i++) {
    // past the end charCodeAt gives NaN, which is no base64 character either
    const c = hash.charCodeAt(i);
    const s = c < 128 ? SEXTET[c] : -1;
    if (s < 0) return prefixOfBytes(createHash('sha256').update(hash).digest(), 0);
    bits = bits * 64 + s;
  }
  return Math.floor(bits / 4);
}

/** keyOf for a hash kept as its bytes, from the 6 bytes at `start`. */
export function keyOfBytes(code: number, bytes: Uint8Array, start: number): number {
  return prefixOfBytes(bytes, start) * 2 + code;
}

function prefixOfBytes(b: Uint8Array, s: number): number {
  return (
    b[s] * 2 ** 38 + b[s + 1] * 2 ** 30 + b[s + 2] * 2 ** 22 + b[s + 3] * 2 ** 14 + b[s + 4] * 2 ** 6 + (b[s + 5] >>> 2)
  );
}
