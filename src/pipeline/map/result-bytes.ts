/** The result columns of an answered chunk as columns of UTF-8 bytes, written straight from its packed answers. */
import { isAscii } from 'node:buffer';
import type { ByteColumn } from '../io/row-blocks.js';
import { hashCell } from '../io/output/hash-cells.js';
import { timeCell, type TimeFormat } from '../io/typed-cells.js';
import { hashText } from './prepare-rows.js';
import type { ResultLayout, SentHashes } from './result-columns.js';
import { SLOT, SLOT_STATUS_NAMES } from './row-chunk.js';

/**
 * A chunk's answers as the thread that keeps its rows gets them (threads/slot-answers.ts SlotAnswers): per slot
 * a status and a reason; per identifier column the UTF-8 bytes of the u and the p of its mapped slots; per
 * mapped slot the lengths of its u and p, and r.
 */
export interface PackedAnswers {
  status: Uint8Array;
  /** The distinct reasons of the slots that are not mapped. */
  reasonTexts: readonly string[];
  /** Per slot: 0 for no reason, else 1 + the index of its reason in reasonTexts. */
  reasonOf: Uint32Array;
  u: readonly Uint8Array[];
  p: readonly Uint8Array[];
  /** Per mapped slot, in slot order: the bytes of u, and of p (NO_P when p is null). */
  lengths: Uint32Array;
  r: Float64Array;
  /** map --api v2: per mapped slot, the salt bucket. */
  buckets: readonly (string | undefined)[] | null;
}

/**
 * Writes a whole number of at most 32 bits in decimal at `at`, as String() writes it, and gives the end: the
 * digits are written lowest first, then turned around.
 */
export function writeInt32Decimal(bytes: Uint8Array, at: number, value: number): number {
  let rest = value | 0;
  if (rest < 0) {
    bytes[at++] = 0x2d;
    rest = -rest;
  }
  const first = at;
  do {
    const tenth = (rest / 10) | 0;
    bytes[at++] = 0x30 + rest - tenth * 10;
    rest = tenth;
  } while (rest > 0);
  for (let i = first, j = at - 1; i < j; i++, j--) {
    const d = bytes[i];
    bytes[i] = bytes[j];
    bytes[j] = d;
  }
  return at;
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
  layout: Pick<ResultLayout, 'emitHash' | 'hashEncoding' | 'timeFormat'>;
  /** For --emit-hash: the hashes sent, as prepareRows made them. */
  sent?: SentHashes | undefined;
}

const STATUS_BYTES = SLOT_STATUS_NAMES.map((name) => Buffer.from(name, 'latin1'));
const PHONE = Buffer.from('phone', 'latin1');
const EMAIL = Buffer.from('email', 'latin1');
/** Whole numbers up to this size are written digit by digit, in 32-bit arithmetic; others by String(). */
const INT32_MAX = 0x7fffffff;
/** Distinct texts a column remembers the bytes of. */
const TEXTS_SEEN = 8;

/**
 * One result column being written: its cells' UTF-8 bytes one after another in a buffer outside the heap that
 * grows as needed, and each cell's length. No string is made per cell.
 */
class ColumnWriter {
  private bytes: Buffer;
  private at = 0;
  private row = 0;
  /** Texts written lately, and where their bytes are. */
  private readonly seen: { cell: string; at: number; length: number }[] = [];
  /** The last number written in decimal, and where its bytes are. */
  private readonly lastNumber = { value: Number.NaN, at: 0, length: 0 };
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
    // texts repeat from cell to cell (reasons, bucket ids): one written lately has its bytes copied
    const seen = this.seen;
    for (let i = 0; i < seen.length; i++) {
      const entry = seen[i];
      if (entry.cell === cell) {
        this.copy(this.bytes, entry.at, entry.at + entry.length);
        return;
      }
    }
    // a UTF-16 unit becomes at most 3 bytes of UTF-8
    this.room(cell.length * 3);
    const n = cell.length === 0 ? 0 : this.bytes.write(cell, this.at, 'utf8');
    if (seen.length < TEXTS_SEEN) seen.push({ cell, at: this.at, length: n });
    else seen[this.row % TEXTS_SEEN] = { cell, at: this.at, length: n };
    this.at += n;
    this.lengths[this.row++] = n;
  }

  /** A whole number in decimal, as String() writes it. */
  decimal(value: number): void {
    const last = this.lastNumber;
    if (value === last.value && !Object.is(value, -0)) {
      // times repeat from cell to cell: the last one's bytes are copied
      this.copy(this.bytes, last.at, last.at + last.length);
      return;
    }
    if (!(Math.abs(value) <= INT32_MAX) || !Number.isInteger(value)) {
      this.text(String(value));
      return;
    }
    this.room(11);
    const start = this.at;
    const at = writeInt32Decimal(this.bytes, start, value);
    last.value = value;
    last.at = start;
    last.length = at - start;
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
  const { status, reasonOf, lengths, r, buckets } = answers;
  // each reason's bytes once; index 0 (no reason) is the empty cell
  const reasonBytes = [Buffer.alloc(0), ...answers.reasonTexts.map((text) => Buffer.from(text, 'utf8'))];
  const { rowCount, width, v2, layout, sent } = input;
  if (status.length !== rowCount * width || answers.u.length !== width || answers.p.length !== width)
    throw new Error('answers that do not cover the rows of their chunk');
  // the raw UIDs' bytes are the columns' bytes as they are
  if (!answers.u.every(isAscii) || !answers.p.every(isAscii)) return undefined;
  if (layout.emitHash && sent === undefined)
    throw new Error('--emit-hash: the chunk was answered without the hashes that were sent');
  const timeFormat: TimeFormat = layout.timeFormat;
  // each mapped slot's number among the mapped slots, in slot order
  const mappedIndex = new Int32Array(status.length);
  for (let slot = 0, k = 0; slot < status.length; slot++) if (status[slot] === SLOT.mapped) mappedIndex[slot] = k++;
  // the hashes sent are in slot order, one per slot that was valid when prepared: which one is each slot's
  let hashOf: Int32Array | undefined;
  if (layout.emitHash) {
    const hashes = sent as SentHashes;
    hashOf = new Int32Array(status.length);
    let h = 0;
    for (let slot = 0; slot < status.length; slot++) if (hashes.status[slot] === SLOT.pending) hashOf[slot] = h++;
  }
  const out: ByteColumn[] = [];
  for (let c = 0; c < width; c++) {
    const uid = new Uint32Array(rowCount);
    const prev = v2 ? undefined : new Uint32Array(rowCount);
    const bucket = v2 ? new ColumnWriter(rowCount, 8) : undefined;
    const time = v2 ? undefined : new ColumnWriter(rowCount, 10);
    const state = new ColumnWriter(rowCount, 6);
    const why = new ColumnWriter(rowCount, 0);
    for (let row = 0; row < rowCount; row++) {
      const slot = row * width + c;
      const s = status[slot];
      const name = STATUS_BYTES[s];
      state.copy(name, 0, name.length);
      if (s !== SLOT.mapped) {
        bucket?.empty();
        time?.empty();
        const because = reasonBytes[reasonOf[slot]];
        why.copy(because, 0, because.length);
        continue;
      }
      why.empty();
      const k = mappedIndex[slot];
      uid[row] = lengths[2 * k];
      if (bucket !== undefined) {
        const id = buckets === null ? undefined : buckets[k];
        if (id === undefined) bucket.empty();
        else bucket.text(id);
        continue;
      }
      const pLength = lengths[2 * k + 1];
      if (pLength !== NO_P) (prev as Uint32Array)[row] = pLength;
      const seconds = Math.floor(r[k]);
      if (timeFormat === 'unix') (time as ColumnWriter).decimal(seconds);
      else (time as ColumnWriter).text(timeCell(seconds, timeFormat));
    }
    out.push({ bytes: answers.u[c], lengths: uid });
    if (bucket !== undefined) out.push(bucket.done());
    else out.push({ bytes: answers.p[c], lengths: prev as Uint32Array }, (time as ColumnWriter).done());
    out.push(state.done(), why.done());
    if (hashOf !== undefined) {
      const hashes = sent as SentHashes;
      const hash = new ColumnWriter(rowCount, layout.hashEncoding === 'hex' ? 64 : 44);
      const type = new ColumnWriter(rowCount, 5);
      for (let row = 0; row < rowCount; row++) {
        const slot = row * width + c;
        if (hashes.status[slot] === SLOT.pending) {
          hash.text(hashCell(hashText(hashes.hashes, hashOf[slot]), layout.hashEncoding));
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
