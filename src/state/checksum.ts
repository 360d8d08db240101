/** The checksums that every stored record of a state file carries, and the error of one that does not match. */
import { crc32 } from 'node:zlib';

export const checksumOf: (data: Uint8Array | string) => number = crc32;

// CRC-32's tables (zlib's polynomial): table t gives a byte's remainder t bytes further on ("slicing by 4")
const TABLES = new Int32Array(4 * 256);
for (let n = 0; n < 256; n++) {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  TABLES[n] = c;
}
for (let i = 256; i < TABLES.length; i++) TABLES[i] = TABLES[TABLES[i - 256] & 255] ^ (TABLES[i - 256] >>> 8);

export const CRC32_TABLE: Int32Array = TABLES.subarray(0, 256);

/**
 * The low 16 bits of the CRC-32 of bytes[start, end): an entry record's check, computed here because on a record
 * that short the call into zlib costs more than the sum.
 */
export function recordCheckOf(bytes: Uint8Array, start: number, end: number): number {
  let c = -1;
  let i = start;
  for (; i + 4 <= end; i += 4) {
    c ^= bytes[i] | (bytes[i + 1] << 8) | (bytes[i + 2] << 16) | (bytes[i + 3] << 24);
    c = TABLES[768 + (c & 255)] ^ TABLES[512 + ((c >>> 8) & 255)] ^ TABLES[256 + ((c >>> 16) & 255)] ^ TABLES[c >>> 24];
  }
  for (; i < end; i++) c = TABLES[(c ^ bytes[i]) & 255] ^ (c >>> 8);
  return ~c & 0xffff;
}

/** A stored value whose checksum does not match; the store adds the file (StateDamagedError). */
export class ChecksumError extends Error {
  constructor(readonly what: string) {
    super(`${what} fails its checksum`);
    this.name = 'ChecksumError';
  }
}

/** `bytes` with their 4-byte CRC-32 appended. */
export function withChecksum(bytes: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(bytes.byteLength + 4);
  out.set(bytes, 0);
  out.writeUInt32LE(checksumOf(bytes), bytes.byteLength);
  return out;
}

/** What withChecksum was given, or null when the checksum does not match (or there is none). */
export function withoutChecksum(piece: Buffer): Buffer | null {
  if (piece.length < 4) return null;
  const bytes = piece.subarray(0, piece.length - 4);
  return checksumOf(bytes) === piece.readUInt32LE(piece.length - 4) ? bytes : null;
}
