/** The result columns of an answered chunk as columns of UTF-8 bytes, written straight from its packed answers. */
import type { ByteColumn } from '../table/row-blocks.js';
import { timeCell, type TimeFormat } from '../table/typed-cells.js';
import type { ResultLayout, SentHashes } from './result-columns.js';
import { SLOT, SLOT_STATUS_NAMES } from './row-chunk.js';

/**
 * A chunk's answers as the thread that keeps its rows gets them (threads/row-threads.ts SlotAnswers): per slot
 * a status and a reason; per mapped slot its u and p in one text, their lengths, and r.
 */
export interface PackedAnswers {
  status: Uint8Array;
  reason: readonly (string | null)[];
  text: string;
  /** Per mapped slot: the length of u, and of p (NO_P when p is null). */
  lengths: Uint32Array;
  r: Float64Array;
  /** map --api v2: per mapped slot, the salt bucket. */
  buckets: readonly (string | undefined)[] | null;
}

/** The length of a p that is null, in PackedAnswers.lengths. */
export const NO_P = 0xffffffff;

/** What a chunk's result columns are made from, beyond its answers. */
export interface ResultBytesInput {
  rowCount: number;
  /** Identifier columns per row. */
  width: number;
  /** map --api v2 result columns. */
  v2: boolean;
  layout: Pick<ResultLayout, 'emitHash' | 'timeFormat'>;
  /** For --emit-hash: the hashes sent, as prepareRows made them. */
  sent?: SentHashes | undefined;
}

const STATUS_BYTES = SLOT_STATUS_NAMES.map((name) => Buffer.from(name, 'latin1'));
const PHONE = Buffer.from('phone', 'latin1');
const EMAIL = Buffer.from('email', 'latin1');
/** Whole seconds below this are written digit by digit; String() of a number this big is still its digits. */
const PLAIN_DIGITS = 1e15;

/**
 * One result column being written: its cells' UTF-8 bytes one after another in a buffer outside the heap that
 * grows as needed, and each cell's length. No string is made per cell.
 */
class ColumnWriter {
  private bytes: Buffer;
  private at = 0;
  private row = 0;
  readonly lengths: Uint32Array;

  constructor(rows: number, bytesPerCell: number) {
    this.lengths = new Uint32Array(rows);
    this.bytes = Buffer.allocUnsafe(Math.max(64, rows * bytesPerCell));
  }

  private room(n: number): void {
    if (this.at + n <= this.bytes.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.bytes.length * 2, this.at + n));
    this.bytes.copy(grown, 0, 0, this.at);
    this.bytes = grown;
  }

  empty(): void {
    this.lengths[this.row++] = 0;
  }

  /** Bytes `start` to `end` of `from`. */
  copy(from: Uint8Array, start: number, end: number): void {
    const n = end - start;
    this.room(n);
    const bytes = this.bytes;
    const at = this.at;
    // short cells are copied faster byte by byte than by a call that copies a range
    if (n < 48) for (let i = 0; i < n; i++) bytes[at + i] = from[start + i];
    else bytes.set(from.subarray(start, end), at);
    this.at += n;
    this.lengths[this.row++] = n;
  }

  text(cell: string): void {
    // a UTF-16 unit becomes at most 3 bytes of UTF-8
    this.room(cell.length * 3);
    const n = cell.length === 0 ? 0 : this.bytes.write(cell, this.at, 'utf8');
    this.at += n;
    this.lengths[this.row++] = n;
  }

  /** A whole number in decimal, as String() writes it. */
  decimal(value: number): void {
    if (!(Math.abs(value) < PLAIN_DIGITS) || !Number.isInteger(value)) {
      this.text(String(value));
      return;
    }
    this.room(17);
    const bytes = this.bytes;
    const start = this.at;
    let at = start;
    let rest = value;
    if (rest < 0) {
      bytes[at++] = 0x2d;
      rest = -rest;
    }
    const first = at;
    do {
      bytes[at++] = 0x30 + (rest % 10);
      rest = Math.floor(rest / 10);
    } while (rest > 0);
    // the digits were written lowest first
    for (let i = first, j = at - 1; i < j; i++, j--) {
      const d = bytes[i];
      bytes[i] = bytes[j];
      bytes[j] = d;
    }
    this.at = at;
    this.lengths[this.row++] = at - start;
  }

  done(): ByteColumn {
    return { bytes: this.bytes.subarray(0, this.at), lengths: this.lengths };
  }
}

/**
 * The result columns of a chunk, in output order (per identifier column: raw_uid, prev_raw_uid, refresh_from,
 * status, reason, and with --emit-hash hash, hash_type; for v2 raw_uid, bucket_id, status, reason, ...): the same
 * cells as result-columns.ts outputRows() writes, as bytes. Undefined when some u or p is not ASCII (a service
 * would never send one): the caller then makes the rows as strings.
 */
export function resultByteColumns(answers: PackedAnswers, input: ResultBytesInput): ByteColumn[] | undefined {
  const { status, reason, text, lengths, r, buckets } = answers;
  const { rowCount, width, v2, layout, sent } = input;
  if (status.length !== rowCount * width) throw new Error('answers that do not cover the rows of their chunk');
  // ASCII: a character of the text is one byte, so its lengths are the bytes' lengths
  if (Buffer.byteLength(text, 'utf8') !== text.length) return undefined;
  const textBytes = Buffer.from(text, 'latin1');
  if (layout.emitHash && sent === undefined)
    throw new Error('--emit-hash: the chunk was answered without the hashes that were sent');
  const timeFormat: TimeFormat = layout.timeFormat;
  const out: ByteColumn[] = [];
  // where each mapped slot's u starts in the text, and its number among the mapped slots, in slot order
  const textAt = new Float64Array(status.length);
  const mappedIndex = new Int32Array(status.length);
  {
    let pos = 0;
    let k = 0;
    for (let slot = 0; slot < status.length; slot++) {
      if (status[slot] !== SLOT.mapped) continue;
      textAt[slot] = pos;
      mappedIndex[slot] = k;
      const pLength = lengths[2 * k + 1];
      pos += lengths[2 * k] + (pLength === NO_P ? 0 : pLength);
      k++;
    }
  }
  // the hashes sent are in slot order, one per slot that was valid when prepared: which one is each slot's
  let hashOf: Int32Array | undefined;
  if (layout.emitHash) {
    const hashes = sent as SentHashes;
    hashOf = new Int32Array(status.length);
    let h = 0;
    for (let slot = 0; slot < status.length; slot++) if (hashes.status[slot] === SLOT.pending) hashOf[slot] = h++;
  }
  for (let c = 0; c < width; c++) {
    const uid = new ColumnWriter(rowCount, 44);
    const second = new ColumnWriter(rowCount, v2 ? 8 : 44);
    const time = v2 ? undefined : new ColumnWriter(rowCount, 10);
    const state = new ColumnWriter(rowCount, 6);
    const why = new ColumnWriter(rowCount, 0);
    for (let row = 0; row < rowCount; row++) {
      const slot = row * width + c;
      const s = status[slot];
      if (s === SLOT.mapped) {
        const k = mappedIndex[slot];
        const from = textAt[slot];
        const uEnd = from + lengths[2 * k];
        uid.copy(textBytes, from, uEnd);
        const pLength = lengths[2 * k + 1];
        if (v2) {
          const bucket = buckets === null ? undefined : buckets[k];
          if (bucket === undefined) second.empty();
          else second.text(bucket);
        } else {
          if (pLength === NO_P) second.empty();
          else second.copy(textBytes, uEnd, uEnd + pLength);
          const seconds = Math.floor(r[k]);
          if (timeFormat === 'unix') (time as ColumnWriter).decimal(seconds);
          else (time as ColumnWriter).text(timeCell(seconds, timeFormat));
        }
        state.copy(STATUS_BYTES[SLOT.mapped], 0, STATUS_BYTES[SLOT.mapped].length);
        why.empty();
      } else {
        uid.empty();
        second.empty();
        time?.empty();
        const name = STATUS_BYTES[s];
        state.copy(name, 0, name.length);
        why.text(reason[slot] ?? '');
      }
    }
    out.push(uid.done(), second.done());
    if (time !== undefined) out.push(time.done());
    out.push(state.done(), why.done());
    if (hashOf !== undefined) {
      const hashes = sent as SentHashes;
      const hash = new ColumnWriter(rowCount, 44);
      const type = new ColumnWriter(rowCount, 5);
      for (let row = 0; row < rowCount; row++) {
        const slot = row * width + c;
        if (hashes.status[slot] === SLOT.pending) {
          hash.text(hashes.hashes[hashOf[slot]]);
          const word = hashes.phone[slot] === 1 ? PHONE : EMAIL;
          type.copy(word, 0, word.length);
        } else {
          hash.empty();
          type.empty();
        }
      }
      out.push(hash.done(), type.done());
    }
  }
  return out;
}
