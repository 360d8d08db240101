/**
 * The tables of a PostgreSQL state and the checksum of its entry rows. One column per value (SQL filters on r,
 * on ids and on raw UIDs), keyed by the entry's key (its type and hash as bytes, stored-bytes.ts); the id orders
 * the opt-out sweep and exports.
 */
import { crc32 } from 'node:zlib';

/** The schema a new state is made at and the only one this build reads. */
export const PG_SCHEMA_VERSION = 2;

/** The entry columns in the order every read of a whole row selects them (rowOf reads them so). */
export const ENTRY_COLUMNS =
  'id, key, status, due, u, p, r, bucket_id, last_mapped, last_optout_check, opted_out_since, sum';

/** The statements that make a state in schema `s` (an identifier parseStateUrl checked). */
export function schemaDdl(s: string): string {
  return `
CREATE TABLE ${s}.meta (
  key   text PRIMARY KEY,
  value text NOT NULL,
  sum   bigint NOT NULL
);
CREATE TABLE ${s}.entries (
  id                bigserial PRIMARY KEY,
  key               bytea NOT NULL UNIQUE,
  status            smallint NOT NULL,
  due               boolean NOT NULL,
  u                 bytea,
  p                 bytea,
  r                 double precision,
  bucket_id         text,
  last_mapped       double precision,
  last_optout_check double precision,
  opted_out_since   double precision,
  sum               integer NOT NULL
);
CREATE INDEX entries_by_r ON ${s}.entries (r, id) WHERE r IS NOT NULL;
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

/** An entry row's values as stored: its key and raw UIDs as bytes, its codes as numbers. */
export interface EntryRow {
  key: Buffer;
  status: number;
  due: boolean;
  u: Buffer | null;
  p: Buffer | null;
  r: number | null;
  bucketId: string | null;
  lastMappedS: number | null;
  lastOptoutCheckS: number | null;
  optedOutSinceMs: number | null;
}

// the bytes a row's checksum is taken over, reused from row to row (grown for a long value)
let scratch = Buffer.alloc(512);

/**
 * An entry row's checksum (as a signed 32-bit integer, the column's type): a CRC-32 over every value laid out in
 * bytes (each byte string after its length, each number as a float64 after a flag of null), so that a value
 * changed, or moved to another column or row, reads as damage.
 */
export function entrySumOf(e: EntryRow): number {
  const bucketBytes = e.bucketId === null ? 0 : e.bucketId.length * 3;
  const most = 4 * 4 + e.key.length + (e.u?.length ?? 0) + (e.p?.length ?? 0) + bucketBytes + 2 + 4 * 9;
  if (scratch.length < most) scratch = Buffer.alloc(most * 2);
  const b = scratch;
  let at = bytesAt(b, 0, e.key);
  b[at++] = e.status;
  b[at++] = e.due ? 1 : 0;
  at = bytesAt(b, at, e.u);
  at = bytesAt(b, at, e.p);
  if (e.bucketId === null) {
    b.writeUInt32LE(0xffffffff, at);
    at += 4;
  } else {
    const n = b.write(e.bucketId, at + 4, 'utf8');
    b.writeUInt32LE(n, at);
    at += 4 + n;
  }
  at = numberAt(b, at, e.r);
  at = numberAt(b, at, e.lastMappedS);
  at = numberAt(b, at, e.lastOptoutCheckS);
  at = numberAt(b, at, e.optedOutSinceMs);
  return crc32(b.subarray(0, at)) | 0;
}

function bytesAt(b: Buffer, at: number, v: Buffer | null): number {
  if (v === null) {
    b.writeUInt32LE(0xffffffff, at);
    return at + 4;
  }
  b.writeUInt32LE(v.length, at);
  v.copy(b, at + 4);
  return at + 4 + v.length;
}

function numberAt(b: Buffer, at: number, v: number | null): number {
  b[at] = v === null ? 0 : 1;
  b.writeDoubleLE(v ?? 0, at + 1);
  return at + 9;
}
