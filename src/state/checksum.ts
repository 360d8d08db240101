/** The checksums that every stored record of a state file carries, and the error of one that does not match. */
import { crc32 } from 'node:zlib';

/** CRC-32 (zlib's, in native code): cheap on the short records of a state file, and it finds any burst of 32 bits. */
export function checksumOf(data: Uint8Array | string): number {
  return crc32(data);
}

// CRC-32's table (the polynomial zlib uses), for recordCheckOf
const TABLE = new Int32Array(256);
for (let n = 0; n < 256; n++) {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  TABLE[n] = c;
}

/**
 * An entry record's check: the low 16 bits of the CRC-32 of bytes[start, end) (2 bytes: a record is about 76, see
 * entry-record.ts). Computed here, a byte at a time, rather than by zlib: on a record that short the call into
 * zlib and the view it needs cost as much as the sum, and a walk checks every record of the table.
 */
export function recordCheckOf(bytes: Uint8Array, start: number, end: number): number {
  let c = -1;
  for (let i = start; i < end; i++) c = TABLE[(c ^ bytes[i]) & 255] ^ (c >>> 8);
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

/** `bytes` with the 4-byte CRC-32 of them appended (the pieces of the keys filters and saved tail keys). */
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
