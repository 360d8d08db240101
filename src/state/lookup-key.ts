/** The lookup key of an entry: an integer made of the first bits of its hash and its DII type. */
import { createHash } from 'node:crypto';
import type { DiiType } from '../identity/index.js';
import { TYPE_CODE } from './schema.js';

const BASE64_PREFIX = /^[A-Za-z0-9+/]{8}/;

/**
 * 46 bits of the hash and one bit of type: a non-negative integer that SQLite stores in 6 bytes and a JS number
 * holds exactly. A base64 hash (every SHA-256 the tool stores) gives its first 6 bytes; any other string gives
 * the first bytes of its own SHA-256. Different hashes may share a key: every reader compares the stored hash.
 */
export function keyOf(type: DiiType | number, hash: string): number {
  const code = typeof type === 'number' ? type : TYPE_CODE[type];
  const b = BASE64_PREFIX.test(hash)
    ? Buffer.from(hash.slice(0, 8), 'base64')
    : createHash('sha256').update(hash).digest();
  const prefix = b[0] * 2 ** 38 + b[1] * 2 ** 30 + b[2] * 2 ** 22 + b[3] * 2 ** 14 + b[4] * 2 ** 6 + (b[5] >>> 2);
  return prefix * 2 + code;
}
