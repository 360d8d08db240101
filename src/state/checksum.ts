/** The checksums that every stored record of a state file carries, and the error of one that does not match. */
import { crc32 } from 'node:zlib';

/** CRC-32 (zlib's, in native code): cheap on the short records of a state file, and it finds any burst of 32 bits. */
export function checksumOf(data: Uint8Array | string): number {
  return crc32(data);
}

/** An entry record's check: the low 16 bits of its CRC-32 (2 bytes: a record is about 74, see entry-record.ts). */
export function recordCheckOf(bytes: Uint8Array, start: number, end: number): number {
  return crc32(bytes.subarray(start, end)) & 0xffff;
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
