/**
 * The tables of a PostgreSQL state and the checksum of its entry rows. One column per value (SQL filters on r,
 * on ids and on raw UIDs), keyed by the entry's key (its type and hash as bytes, stored-bytes.ts); the id orders
 * the due walk, the opt-out sweep and exports.
 */
import type { StateRecord } from '../backend.js';
import { CRC32_TABLE } from '../checksum.js';
import { STATUS_CODE, TYPE_CODE } from '../schema.js';

/** The schema a new state is made at and the only one this build reads. */
export const PG_SCHEMA_VERSION = 5;

/**
 * The statements that make a state in schema `s` (an identifier parseStateUrl checked). No index holds r or what a
 * sweep changes, and inserts leave a tenth of each page free: an update that fits on its page is heap-only (HOT).
 * Keys are kept distinct by a hash index (an exclusion constraint, as a hash index cannot be unique): a lookup or
 * an insert reads one page of it, where a B-tree of random keys this long is walked from its root, a page a level.
 */
export function schemaDdl(s: string): string {
  return `
CREATE TABLE ${s}.meta (
  key   text PRIMARY KEY,
  value text NOT NULL,
  sum   bigint NOT NULL
);
CREATE TABLE ${s}.entries (
  id                bigserial PRIMARY KEY,
  key               bytea NOT NULL,
  status            smallint NOT NULL,
  due               boolean NOT NULL,
  u                 bytea,
  p                 bytea,
  r                 double precision,
  bucket_id         text,
  last_mapped       double precision,
  last_optout_check double precision,
  opted_out_since   double precision,
  sum               integer NOT NULL,
  CONSTRAINT entries_key EXCLUDE USING hash (key WITH =)
) WITH (fillfactor = 90);
CREATE TABLE ${s}.runs (
  id          bigserial PRIMARY KEY,
  command     text NOT NULL,
  args        text NOT NULL,
  pid         integer NOT NULL,
  started_at  double precision NOT NULL,
  now         double precision NOT NULL,
  finished_at double precision,
  summary     text,
  exit_code   integer
);
CREATE TABLE ${s}.pending_changes (
  id         bigserial PRIMARY KEY,
  run_id     bigint NOT NULL,
  kind       text NOT NULL,
  row        text NOT NULL,
  sum        bigint NOT NULL,
  created_at double precision NOT NULL
);
CREATE INDEX pending_changes_by_kind ON ${s}.pending_changes (kind, id);
`;
}

/**
 * An entry row's checksum (as a signed 32-bit integer, the column's type): a CRC-32 over every value laid out in
 * bytes (each text as UTF-8 after its length in UTF-16 units, each number as a float64 after a flag of null), so
 * that a value changed, or moved to another column or row, reads as damage. Over the texts of the hash and raw
 * UIDs, which the bytes stored stand for one to one (stored-bytes.ts). Summed with no buffer to write first (a lookup
 * sums every row it reads, a commit every row it writes), the hash and raw UIDs from bytes where `at` says they lie.
 */
export function entrySumOf(e: StateRecord, at?: TextsAt): number {
  let c = crcByte(-1, TYPE_CODE[e.type]);
  c = at !== undefined && at.hash >= 0 ? crcAscii(c, at.hashes, at.hash, e.hash.length) : crcText(c, e.hash);
  c = crcByte(c, STATUS_CODE[e.status]);
  c = crcByte(c, e.due ? 1 : 0);
  c = at !== undefined && at.u >= 0 ? crcAscii(c, at.line, at.u, (e.u as string).length) : crcText(c, e.u);
  c = at !== undefined && at.p >= 0 ? crcAscii(c, at.line, at.p, (e.p as string).length) : crcText(c, e.p);
  c = crcText(c, e.bucketId);
  c = crcNumber(c, e.r);
  c = crcNumber(c, e.lastMappedS);
  c = crcNumber(c, e.lastOptoutCheckS);
  c = crcNumber(c, e.optedOutSinceMs);
  return ~c;
}

function crcByte(c: number, b: number): number {
  return CRC32_TABLE[(c ^ b) & 255] ^ (c >>> 8);
}

// CRC-32's tables for four bytes at a time ("slicing by 4"): table t gives a byte's remainder t bytes further on
const SLICES = new Int32Array(4 * 256);
for (let n = 0; n < 256; n++) {
  let c = CRC32_TABLE[n];
  SLICES[n] = c;
  for (let t = 1; t < 4; t++) {
    c = CRC32_TABLE[c & 255] ^ (c >>> 8);
    SLICES[t * 256 + n] = c;
  }
}

/** Four bytes at once: v's bytes from its lowest. */
function crcUint32(c: number, v: number): number {
  c ^= v;
  return (
    SLICES[768 + (c & 255)] ^ SLICES[512 + ((c >>> 8) & 255)] ^ SLICES[256 + ((c >>> 16) & 255)] ^ SLICES[c >>> 24]
  );
}

/**
 * Where a record's hash and raw UIDs lie as bytes, one a character (ASCII), for entrySumOf to sum them there: a
 * string's characters read one call each cost more than the bytes. Each at -1 is summed from the record's text.
 */
export interface TextsAt {
  hashes: Uint8Array;
  hash: number;
  line: Uint8Array;
  u: number;
  p: number;
}

/** crcText of an ASCII text of `length` characters found as bytes at b[from...]. */
function crcAscii(c: number, b: Uint8Array, from: number, length: number): number {
  c = crcUint32(c, length);
  const end = from + length;
  let i = from;
  for (; i + 4 <= end; i += 4) c = crcUint32(c, b[i] | (b[i + 1] << 8) | (b[i + 2] << 16) | (b[i + 3] << 24));
  for (; i < end; i++) c = crcByte(c, b[i]);
  return c;
}

/** A text's length, then its UTF-8 bytes (a lone surrogate as U+FFFD, as the server and Buffer store it). */
function crcText(c: number, v: string | null): number {
  if (v === null) return crcUint32(c, 0xffffffff);
  c = crcUint32(c, v.length);
  let i = 0;
  // four ASCII characters (four bytes) at a time, as long as they come: every hash and raw UID of the service
  for (; i + 4 <= v.length; i += 4) {
    const a = v.charCodeAt(i);
    const b = v.charCodeAt(i + 1);
    const d = v.charCodeAt(i + 2);
    const e = v.charCodeAt(i + 3);
    if ((a | b | d | e) >= 0x80) break;
    c = crcUint32(c, a | (b << 8) | (d << 16) | (e << 24));
  }
  for (; i < v.length; i++) {
    let u = v.charCodeAt(i);
    if (u < 0x80) {
      c = crcByte(c, u);
    } else if (u < 0x800) {
      c = crcByte(crcByte(c, 0xc0 | (u >> 6)), 0x80 | (u & 63));
    } else {
      if (u >= 0xd800 && u < 0xdc00 && i + 1 < v.length) {
        const low = v.charCodeAt(i + 1);
        if (low >= 0xdc00 && low < 0xe000) {
          const cp = 0x10000 + ((u - 0xd800) << 10) + (low - 0xdc00);
          c = crcByte(crcByte(c, 0xf0 | (cp >> 18)), 0x80 | ((cp >> 12) & 63));
          c = crcByte(crcByte(c, 0x80 | ((cp >> 6) & 63)), 0x80 | (cp & 63));
          i++;
          continue;
        }
      }
      if (u >= 0xd800 && u < 0xe000) u = 0xfffd;
      c = crcByte(crcByte(crcByte(c, 0xe0 | (u >> 12)), 0x80 | ((u >> 6) & 63)), 0x80 | (u & 63));
    }
  }
  return c;
}

const float = new DataView(new ArrayBuffer(8));

function crcNumber(c: number, v: number | null): number {
  if (v === null) return crcByte(c, 0);
  float.setFloat64(0, v, true);
  c = crcByte(c, 1);
  return crcUint32(crcUint32(c, float.getInt32(0, true)), float.getInt32(4, true));
}
