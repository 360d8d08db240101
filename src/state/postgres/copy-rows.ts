/** Entry records as the rows of a binary COPY into the entries table (PostgreSQL's binary COPY format). */
import type { StateRecord } from '../backend.js';
import { STATUS_CODE, TYPE_CODE } from '../schema.js';
import { entrySumOf } from './schema.js';
import { HASH_BYTES, RAW_UID_BYTES, textBytesBound, writeTextBytes } from './stored-bytes.js';

/** The columns a new entry is written with, by a COPY's rows and an insert's arrays alike; id is the table's. */
export const NEW_ENTRY_COLUMNS =
  'key, status, due, u, p, r, bucket_id, last_mapped, last_optout_check, opted_out_since, sum';

const FIELDS = 11;
// the signature, then flags and the length of an extension of the header: none
const HEADER = Buffer.concat([Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1'), Buffer.alloc(8)]);
// a field count of -1 ends the rows
const TRAILER = Buffer.from([0xff, 0xff]);
// per row, what is not text: the field count, each field's length, status, due, four float8 and the sum
const FIXED_BYTES = 2 + FIELDS * 4 + 1 + 2 + 1 + 4 * 8 + 4;

/**
 * The rows of records[from, to) in binary COPY's layout, after the format's header when `header` and before its
 * trailer when `last`: each text as the bytes a lookup reads back (stored-bytes.ts), each number as the column's
 * type holds it, with the row's sum.
 */
export function copyRowsOf(
  records: readonly StateRecord[],
  from: number,
  to: number,
  header: boolean,
  last: boolean,
): Buffer {
  let size = (header ? HEADER.length : 0) + (last ? TRAILER.length : 0);
  for (let i = from; i < to; i++) {
    const e = records[i];
    size += FIXED_BYTES + textBytesBound(e.hash, HASH_BYTES);
    if (e.u !== null) size += textBytesBound(e.u, RAW_UID_BYTES);
    if (e.p !== null) size += textBytesBound(e.p, RAW_UID_BYTES);
    if (e.bucketId !== null) size += 3 * e.bucketId.length;
  }
  const out = Buffer.allocUnsafe(size);
  // the numbers through a view: a Buffer's write methods check their arguments on every call
  const view = new DataView(out.buffer, out.byteOffset, out.byteLength);
  let at = header ? HEADER.copy(out, 0) : 0;
  for (let i = from; i < to; i++) {
    const e = records[i];
    view.setInt16(at, FIELDS);
    // key: the type's code, then the hash's bytes
    const keyBytes = writeTextBytes(e.hash, HASH_BYTES, out, at + 7);
    view.setInt32(at + 2, 1 + keyBytes);
    out[at + 6] = TYPE_CODE[e.type];
    at += 7 + keyBytes;
    view.setInt32(at, 2);
    view.setInt16(at + 4, STATUS_CODE[e.status]);
    view.setInt32(at + 6, 1);
    out[at + 10] = e.due ? 1 : 0;
    at += 11;
    at = rawUid(out, view, at, e.u);
    at = rawUid(out, view, at, e.p);
    at = float8(view, at, e.r);
    if (e.bucketId === null) {
      view.setInt32(at, -1);
      at += 4;
    } else {
      const n = out.write(e.bucketId, at + 4, 'utf8');
      view.setInt32(at, n);
      at += 4 + n;
    }
    at = float8(view, at, e.lastMappedS);
    at = float8(view, at, e.lastOptoutCheckS);
    at = float8(view, at, e.optedOutSinceMs);
    view.setInt32(at, 4);
    view.setInt32(at + 4, entrySumOf(e));
    at += 8;
  }
  if (last) at += TRAILER.copy(out, at);
  return out.subarray(0, at);
}

function rawUid(out: Buffer, view: DataView, at: number, text: string | null): number {
  if (text === null) {
    view.setInt32(at, -1);
    return at + 4;
  }
  const n = writeTextBytes(text, RAW_UID_BYTES, out, at + 4);
  view.setInt32(at, n);
  return at + 4 + n;
}

function float8(view: DataView, at: number, v: number | null): number {
  if (v === null) {
    view.setInt32(at, -1);
    return at + 4;
  }
  view.setInt32(at, 8);
  view.setFloat64(at + 4, v);
  return at + 12;
}
