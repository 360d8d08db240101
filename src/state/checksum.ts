/** The checksums that every stored record of a state file carries, and the error of one that does not match. */
import { crc32 } from 'node:zlib';

/** CRC-32 (zlib's, in native code): cheap on the short records of a state file, and it finds any burst of 32 bits. */
export function checksumOf(data: Uint8Array | string): number {
  return crc32(data);
}

// CRC-32's tables (the polynomial zlib uses) for recordCheckOf: table t gives a byte's remainder t bytes further on,
// so that four bytes are folded in at once ("slicing by 4")
const TABLES = new Int32Array(4 * 256);
for (let n = 0; n < 256; n++) {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  TABLES[n] = c;
}
for (let n = 0; n < 256; n++) {
  let c = TABLES[n];
  for (let t = 1; t < 4; t++) {
    c = TABLES[c & 255] ^ (c >>> 8);
    TABLES[t * 256 + n] = c;
  }
}

/** CRC-32's table of one byte's remainder (zlib's polynomial), for sums taken a byte at a time in JS. */
export const CRC32_TABLE: Int32Array = TABLES.subarray(0, 256);

/**
 * An entry record's check: the low 16 bits of the CRC-32 of bytes[start, end) (2 bytes: a record is about 76, see
 * entry-record.ts). Computed here, four bytes at a time, rather than by zlib: on a record that short the call into
 * zlib and the view it needs cost more than the sum, and a walk checks every record of the table.
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

/**
 * A stored record whose checksum does not match: the file was damaged (a disk, a copy, an edit). It names what
 * failed but not the file, which the store adds (StateDamagedError).
 */
export class ChecksumError extends Error {
  constructor(readonly what: string) {
    super(`${what} fails its checksum`);
    this.name = 'ChecksumError';
  }
}

/** `bytes` with the 4-byte CRC-32 of them appended (the pieces of the keys filter). */
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
