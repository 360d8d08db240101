/** The record of an entry: every value of it packed in one blob, the entries table's one column besides the id. */
import { ChecksumError, recordCheckOf } from './checksum.js';
import { keyOf, keyOfBytes } from './lookup-key.js';
import { statusOfCode, TYPE_OF_CODE } from './schema.js';
import type { StateRecord } from './types.js';

/**
 * A record is
 *   byte 0        flags: bit 0 the DII type code; bits 1-2 the status code (1 to 3), or 0 when a second flags byte
 *                 follows (which then holds the status); which values follow: bit 3 u, bit 4 p, bit 5 r,
 *                 bit 6 last_mapped; bit 7 the raw UIDs are of 32 bytes rather than 33 (the service gives either)
 *   byte 1        (only when byte 0's status bits are 0) bits 0-1 the status code; bit 2 due; which values follow:
 *                 bit 3 bucket_id, bit 4 last_optout_check, bit 5 opted_out_since; bit 6 the hash, u and p are
 *                 sized (not of their usual size); bit 7 the times are 8-byte floats instead of 4-byte integers
 *   the hash      32 bytes, or sized: a varint of (2 x length + 1 for UTF-8 text, + 0 for bytes), then those bytes
 *   u, p          when flagged: 33 (or 32) bytes, or sized as the hash
 *   r, last_mapped, last_optout_check
 *                 when flagged, in this order: seconds as 4-byte unsigned integers, or 8-byte floats
 *   opted_out_since
 *                 when flagged: milliseconds as an 8-byte float
 *   bucket_id     when flagged: a varint of its UTF-8 length, then the text
 *   check         2 bytes: the low 16 bits of the CRC-32 of every byte of the record before it (checksum.ts),
 *                 checked as the record is read
 * all little-endian; a varint is 7 bits a byte, low bits first. A record says its own length, so records joined
 * into one blob are read one after the other.
 */
const F_TYPE = 0x01;
const F_STATUS_SHIFT = 1;
const F_U = 0x08;
const F_P = 0x10;
const F_R = 0x20;
const F_LAST_MAPPED = 0x40;
const F_UID_32 = 0x80;
const M_STATUS = 0x03;
const M_DUE = 0x04;
const M_BUCKET = 0x08;
const M_CHECK = 0x10;
const M_SINCE = 0x20;
const M_SIZED = 0x40;
const M_WIDE = 0x80;

const CHECK_BYTES = 2;
export const HASH_BYTES = 32;
export const UID_BYTES = 33;
const UID_32_BYTES = 32;
const TWO_32 = 4_294_967_296;

/** The bytes of a canonical base64 text (what the service sends, every hash the tool makes); any other text as is. */
export function storedOf(text: string): Buffer | string {
  if (text.length === 0 || text.length % 4 !== 0) return text;
  const bytes = Buffer.from(text, 'base64');
  // canonical only: the decoder skips what is not base64, and two texts must never share bytes
  return bytes.toString('base64') === text ? bytes : text;
}

/** An entry's values as the file keeps them: type and status as codes, hashes and raw UIDs as storedOf gives them. */
export type EntryValues = Omit<StateRecord, 'type' | 'status' | 'hash' | 'u' | 'p'> & {
  type: number;
  status: number;
  hash: Uint8Array | string;
  u: Uint8Array | string | null;
  p: Uint8Array | string | null;
};

function fitsU32(t: number | null): boolean {
  return t === null || (Number.isInteger(t) && t >= 0 && t < TWO_32);
}

/** At least the bytes a value takes, sized or not: a UTF-16 unit is at most 3 UTF-8 bytes, a varint at most 8. */
function roomOf(value: Uint8Array | string | null): number {
  if (value === null) return 0;
  return (typeof value === 'string' ? 3 * value.length : value.length) + 8;
}

/** The one usual size (33 or 32) of the raw UIDs' bytes; -1 when they must be sized. */
function usualUidSize(u: Uint8Array | string | null, p: Uint8Array | string | null): number {
  if (u === null && p === null) return UID_BYTES;
  if (typeof u === 'string' || typeof p === 'string') return -1;
  const size = (u ?? p)?.length ?? -1;
  if (size !== UID_BYTES && size !== UID_32_BYTES) return -1;
  return (u === null || u.length === size) && (p === null || p.length === size) ? size : -1;
}

/**
 * Packs records into shared buffers (a few allocations per batch instead of one per entry). A part is never
 * written twice, so every record given out stays valid.
 */
export class RecordWriter {
  private buffer: Buffer;
  private used = 0;

  constructor(capacity = 64 * 1024) {
    this.buffer = Buffer.allocUnsafe(Math.max(256, capacity));
  }

  /** The record of these values. Throws a TypeError for a value the format cannot hold. */
  write(v: EntryValues): Buffer {
    const { hash, u, p } = v;
    if (!(v.type === 0 || v.type === 1) || !Number.isInteger(v.status) || v.status < 0 || v.status > 3) {
      throw new TypeError(`an entry record cannot hold type ${v.type} or status ${v.status}`);
    }
    const wide = !fitsU32(v.r) || !fitsU32(v.lastMappedS) || !fitsU32(v.lastOptoutCheckS);
    const timeBytes = wide ? 8 : 4;
    const uidSize = usualUidSize(u, p);
    const sized = uidSize < 0 || typeof hash === 'string' || hash.length !== HASH_BYTES;
    let more = v.status;
    if (v.due) more |= M_DUE;
    if (sized) more |= M_SIZED;
    if (wide) more |= M_WIDE;
    if (v.lastOptoutCheckS !== null) more |= M_CHECK;
    if (v.optedOutSinceMs !== null) more |= M_SINCE;
    if (v.bucketId !== null) more |= M_BUCKET;
    let flags = v.type | (uidSize === UID_32_BYTES ? F_UID_32 : 0);
    if (u !== null) flags |= F_U;
    if (p !== null) flags |= F_P;
    if (v.r !== null) flags |= F_R;
    if (v.lastMappedS !== null) flags |= F_LAST_MAPPED;
    const second = more !== v.status || v.status === 0;
    if (!second) flags |= v.status << F_STATUS_SHIFT;
    // the flags, the times and the check take at most 36 bytes
    const room = 36 + roomOf(hash) + roomOf(u) + roomOf(p) + roomOf(v.bucketId);
    if (this.used + room > this.buffer.length) {
      this.buffer = Buffer.allocUnsafe(Math.max(2 * this.buffer.length, room));
      this.used = 0;
    }
    const out = this.buffer;
    const start = this.used;
    let o = start;
    out[o++] = flags;
    if (second) out[o++] = more;
    const put = (x: Uint8Array | string): void => {
      if (sized) o = putSized(out, o, x);
      else o = putBytes(out, o, x as Uint8Array);
    };
    put(hash);
    if (u !== null) put(u);
    if (p !== null) put(p);
    for (const t of [v.r, v.lastMappedS, v.lastOptoutCheckS]) {
      if (t === null) continue;
      if (wide) out.writeDoubleLE(t, o);
      else out.writeUInt32LE(t, o);
      o += timeBytes;
    }
    if (v.optedOutSinceMs !== null) {
      out.writeDoubleLE(v.optedOutSinceMs, o);
      o += 8;
    }
    if (v.bucketId !== null) {
      o = putVarint(out, o, Buffer.byteLength(v.bucketId, 'utf8'));
      o += out.write(v.bucketId, o, 'utf8');
    }
    out.writeUInt16LE(recordCheckOf(out, start, o), o);
    o += CHECK_BYTES;
    this.used = o;
    return out.subarray(start, o);
  }
}

function putVarint(out: Buffer, at: number, n: number): number {
  let o = at;
  while (n >= 128) {
    out[o++] = (n % 128) | 128;
    n = Math.floor(n / 128);
  }
  out[o++] = n;
  return o;
}

function putBytes(out: Buffer, at: number, bytes: Uint8Array): number {
  out.set(bytes, at);
  return at + bytes.length;
}

/** A value after its size tag: 2n for n bytes, 2n + 1 for n bytes of UTF-8 text. */
function putSized(out: Buffer, at: number, value: Uint8Array | string): number {
  const tag = typeof value === 'string' ? 2 * Buffer.byteLength(value, 'utf8') + 1 : 2 * value.length;
  const o = putVarint(out, at, tag);
  return typeof value === 'string' ? o + out.write(value, o, 'utf8') : putBytes(out, o, value);
}

/** A record cut short: flags that promise more bytes than it has. */
export class RecordFormatError extends Error {}

/**
 * One record read in place, reused from record to record: its numbers (NaN for a time it lacks), and where its
 * values are in `bytes`, each with a size: 2n for n bytes, 2n + 1 for n bytes of UTF-8 text, -1 for none.
 */
export class EntryView {
  bytes: Buffer = Buffer.alloc(0);
  type = 0;
  status = 0;
  due = 0;
  r = Number.NaN;
  lastMappedS = Number.NaN;
  lastOptoutCheckS = Number.NaN;
  optedOutSinceMs = Number.NaN;
  hashStart = 0;
  hashSize = 0;
  uStart = 0;
  uSize = -1;
  pStart = 0;
  pSize = -1;
  bucketStart = 0;
  bucketSize = -1;

  /** Reads the record at `at`; gives the position after it. `check`: false for a record checked already. */
  read(bytes: Buffer, at: number, check = true): number {
    this.bytes = bytes;
    const limit = bytes.length;
    if (at >= limit) throw new RecordFormatError('entry record: no bytes');
    const flags = bytes[at];
    let o = at + 1;
    let more = 0;
    this.status = (flags >>> F_STATUS_SHIFT) & 3;
    if (this.status === 0) {
      if (o >= limit) throw new RecordFormatError('entry record: cut short in its flags');
      more = bytes[o++];
      this.status = more & M_STATUS;
    }
    this.type = flags & F_TYPE;
    this.due = (more & M_DUE) !== 0 ? 1 : 0;
    const sized = (more & M_SIZED) !== 0;
    const uidSize = (flags & F_UID_32) !== 0 ? UID_32_BYTES : UID_BYTES;
    o = this.readValue(bytes, o, sized ? -1 : HASH_BYTES, 'hash');
    if ((flags & F_U) !== 0) o = this.readValue(bytes, o, sized ? -1 : uidSize, 'u');
    else this.uSize = -1;
    if ((flags & F_P) !== 0) o = this.readValue(bytes, o, sized ? -1 : uidSize, 'p');
    else this.pSize = -1;
    // the times, without a closure per record: a walk of the table reads every record
    const timeBytes = (more & M_WIDE) !== 0 ? 8 : 4;
    const times =
      ((flags & F_R) !== 0 ? 1 : 0) + ((flags & F_LAST_MAPPED) !== 0 ? 1 : 0) + ((more & M_CHECK) !== 0 ? 1 : 0);
    if (o + times * timeBytes > limit) throw new RecordFormatError('entry record: cut short in its times');
    this.r = (flags & F_R) !== 0 ? timeAt(bytes, o, timeBytes) : Number.NaN;
    if ((flags & F_R) !== 0) o += timeBytes;
    this.lastMappedS = (flags & F_LAST_MAPPED) !== 0 ? timeAt(bytes, o, timeBytes) : Number.NaN;
    if ((flags & F_LAST_MAPPED) !== 0) o += timeBytes;
    this.lastOptoutCheckS = (more & M_CHECK) !== 0 ? timeAt(bytes, o, timeBytes) : Number.NaN;
    if ((more & M_CHECK) !== 0) o += timeBytes;
    if ((more & M_SINCE) !== 0) {
      if (o + 8 > limit) throw new RecordFormatError('entry record: cut short in opted_out_since');
      this.optedOutSinceMs = bytes.readDoubleLE(o);
      o += 8;
    } else this.optedOutSinceMs = Number.NaN;
    if ((more & M_BUCKET) !== 0) {
      const [n, after] = readVarint(bytes, o);
      if (after + n > limit) throw new RecordFormatError('entry record: cut short in bucket_id');
      this.bucketStart = after;
      this.bucketSize = 2 * n + 1;
      o = after + n;
    } else this.bucketSize = -1;
    if (o + CHECK_BYTES > limit) throw new RecordFormatError('entry record: cut short in its check');
    if (check && bytes.readUInt16LE(o) !== recordCheckOf(bytes, at, o)) throw new ChecksumError('an entry record');
    return o + CHECK_BYTES;
  }

  private readValue(bytes: Buffer, at: number, usualSize: number, which: 'hash' | 'u' | 'p'): number {
    let start = at;
    let size = 2 * usualSize;
    if (usualSize < 0) [size, start] = readVarint(bytes, at);
    const length = Math.floor(size / 2);
    if (start + length > bytes.length) throw new RecordFormatError(`entry record: cut short in ${which}`);
    if (which === 'hash') {
      this.hashStart = start;
      this.hashSize = size;
    } else if (which === 'u') {
      this.uStart = start;
      this.uSize = size;
    } else {
      this.pStart = start;
      this.pSize = size;
    }
    return start + length;
  }

  /** A value as the file keeps it: a view of `bytes`, text, or null. */
  stored(start: number, size: number): Buffer | string | null {
    if (size < 0) return null;
    const end = start + Math.floor(size / 2);
    return size % 2 === 1 ? this.bytes.toString('utf8', start, end) : this.bytes.subarray(start, end);
  }

  /** A value as text: bytes as base64 (storedOf's inverse). */
  text(start: number, size: number): string | null {
    if (size < 0) return null;
    return this.bytes.toString(size % 2 === 1 ? 'utf8' : 'base64', start, start + Math.floor(size / 2));
  }

  holdsHash(hash: string): boolean {
    return this.text(this.hashStart, this.hashSize) === hash;
  }

  key(): number {
    return this.hashSize % 2 === 0 && this.hashSize >= 12
      ? keyOfBytes(this.type, this.bytes, this.hashStart)
      : keyOf(this.type, this.text(this.hashStart, this.hashSize) ?? '');
  }

  /** The record's values (views of `bytes`, which must then stay unchanged). */
  values(): EntryValues {
    return {
      type: this.type,
      status: this.status,
      due: this.due === 1,
      hash: this.stored(this.hashStart, this.hashSize) ?? '',
      u: this.stored(this.uStart, this.uSize),
      p: this.stored(this.pStart, this.pSize),
      r: orNull(this.r),
      bucketId: this.stored(this.bucketStart, this.bucketSize) as string | null,
      lastMappedS: orNull(this.lastMappedS),
      lastOptoutCheckS: orNull(this.lastOptoutCheckS),
      optedOutSinceMs: orNull(this.optedOutSinceMs),
    };
  }

  /** The record's values as text (bytes as base64): what a copy reads, and what a due or an exported entry shows. */
  record(): StateRecord {
    return {
      ...this.values(),
      type: TYPE_OF_CODE[this.type],
      hash: this.text(this.hashStart, this.hashSize) ?? '',
      status: statusOfCode(this.status),
      u: this.text(this.uStart, this.uSize),
      p: this.text(this.pStart, this.pSize),
      bucketId: this.text(this.bucketStart, this.bucketSize),
    };
  }
}

/** A time as EntryView holds it (NaN for none) as the values give it. */
export function orNull(t: number): number | null {
  return Number.isNaN(t) ? null : t;
}

function timeAt(bytes: Buffer, at: number, timeBytes: number): number {
  return timeBytes === 4 ? bytes.readUInt32LE(at) : bytes.readDoubleLE(at);
}

function readVarint(bytes: Buffer, at: number): [number, number] {
  let n = 0;
  let scale = 1;
  let o = at;
  for (;;) {
    if (o >= bytes.length || scale > 2 ** 49) throw new RecordFormatError('entry record: a size runs past its end');
    const b = bytes[o++];
    n += (b & 127) * scale;
    if (b < 128) return [n, o];
    scale *= 128;
  }
}
