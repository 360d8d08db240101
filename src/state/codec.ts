/** How hashes and raw UIDs are stored: base64 values as their bytes, anything else as the text it is. */
import { createHash } from 'node:crypto';
import type { DiiType } from '../identity/index.js';
import { TYPE_CODE } from './schema.js';

/** A stored hash, raw UID or previous raw UID: the decoded bytes when the text is canonical base64. */
export type StoredValue = Buffer | string;

/**
 * The bytes of `text` when base64 of them gives back exactly `text` (every SHA-256 hash and raw UID the
 * service sends), else `text` itself. A BLOB and a TEXT never compare equal in SQLite, so the two forms
 * cannot be confused, and decoding gives the very string that was stored.
 */
export function encodeValue(text: string): StoredValue {
  if (text.length === 0 || text.length % 4 !== 0) return text;
  const bytes = Buffer.from(text, 'base64');
  return bytes.toString('base64') === text ? bytes : text;
}

export function encodeNullable(text: string | null | undefined): StoredValue | null {
  return text === null || text === undefined ? null : encodeValue(text);
}

export function decodeValue(stored: unknown): string {
  return Buffer.isBuffer(stored) ? stored.toString('base64') : String(stored);
}

export function decodeNullable(stored: unknown): string | null {
  return stored === null || stored === undefined ? null : decodeValue(stored);
}

// 46 bits of the hash and one bit of type: a non-negative integer that SQLite stores in 6 bytes and a JS number
// holds exactly. Different hashes may share a key; every reader compares the stored hash and type.
const PREFIX_BITS_SCALE = 2 ** 38;

/** The lookup key of an entry (see keyOfBytes). */
export function keyOf(type: DiiType | number, stored: StoredValue): number {
  const code = typeof type === 'number' ? type : TYPE_CODE[type];
  const bytes = Buffer.isBuffer(stored) && stored.length >= 6 ? stored : createHash('sha256').update(stored).digest();
  return keyOfBytes(bytes, code);
}

function keyOfBytes(b: Buffer, code: number): number {
  const prefix = b[0] * PREFIX_BITS_SCALE + b[1] * 2 ** 30 + b[2] * 2 ** 22 + b[3] * 2 ** 14 + b[4] * 2 ** 6 + (b[5] >>> 2);
  return prefix * 2 + code;
}
