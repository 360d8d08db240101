/** A chunk's answers packed for the thread that holds its rows: typed arrays and raw UID bytes, handed over. */
import { BucketAnswer, bucketIdOf } from '../map/bucket-answer.js';
import { NO_P } from '../map/result-bytes.js';
import { SLOT, type RowChunk } from '../map/row-chunk.js';
import { RAW_UID_LENGTH, ScannedAnswers, type MappedV3 } from '../../protocol/index.js';
import { viewOf } from '../io/word-copy.js';

/**
 * A chunk's answers, per identifier cell, packed for the thread that holds its rows: statuses and reasons as
 * they are, and the mapped answers' raw UIDs as UTF-8 bytes, per identifier column and field, in one buffer that
 * is handed over (transferred), not copied. Structured cloning an object or a string per answer costs the main
 * thread, the bound of a threaded map, many times more (its CPU per run is the `main thr` column of `npm run
 * bench`); and a result column is then its bytes as they are (map/result-bytes.ts, map/result-csv.ts).
 */
export interface SlotAnswers {
  status: Uint8Array;
  /** The distinct reasons of the chunk's slots that are not mapped, each once. */
  reasonTexts: string[];
  /** Per slot: 0 when it has no reason (mapped and pending slots), else 1 + the index of its reason in reasonTexts. */
  reasonOf: Uint32Array;
  /**
   * Per identifier column (as many as the chunk's width): the u of each of its mapped slots, in row order, one
   * after another. Views of one buffer, which p's views share.
   */
  u: Uint8Array[];
  /** Per identifier column: the p of each of its mapped slots whose p is not null, in row order. */
  p: Uint8Array[];
  /** Per mapped slot, in slot order: the bytes of u, and of p (NO_P when p is null). */
  lengths: Uint32Array;
  /** Per mapped slot: r (refresh_from). */
  r: Float64Array;
  /** map --api v2: per mapped slot, the salt bucket (v2 answers carry no p and no r). */
  buckets: string[] | null;
  /**
   * The u (key 2k) or p (2k + 1) of mapped slot k that UTF-8 cannot carry as it is (a lone surrogate, which no
   * service sends), to be read back as it was; null when there is none.
   */
  unpaired: Map<number, string> | null;
}

/**
 * Each column's u and p (2c, 2c + 1) of the chunk being packed, gathered before they are put together in the
 * buffer handed over. Kept from chunk to chunk: a chunk's answers are read in one pass, and the columns are then
 * copied whole.
 */
const gathered: { bytes: Buffer; view: DataView }[] = [];

/** Gathered column `i` with room for `need` more bytes after `end`. */
function roomIn(i: number, end: number, need: number): DataView {
  const column = gathered[i];
  if (end + need <= column.bytes.length) return column.view;
  const bytes = Buffer.allocUnsafeSlow(2 * (end + need));
  column.bytes.copy(bytes, 0, 0, end);
  column.bytes = bytes;
  column.view = viewOf(bytes);
  return column.view;
}

/** Packs a chunk's answers: its raw UIDs copied from the answers' bytes (or texts), then put in one buffer. */
export function packAnswers(
  chunk: Pick<RowChunk, 'status' | 'answerOf' | 'answerIndex' | 'reasonOf' | 'reasonTexts' | 'width'>,
): SlotAnswers {
  const { status, answerOf, answerIndex, width } = chunk;
  // copies: reasonOf's buffer is handed over (answerBuffers), and the chunk keeps its own for its reason getter
  const reasonTexts = chunk.reasonTexts.slice();
  const reasonOf = chunk.reasonOf.slice();
  let count = 0;
  for (let slot = 0; slot < status.length; slot++) if (status[slot] === SLOT.mapped) count++;
  while (gathered.length < 2 * width) {
    const bytes = Buffer.allocUnsafeSlow(64 * 1024);
    gathered.push({ bytes, view: viewOf(bytes) });
  }
  const end = new Int32Array(2 * width);
  // each column's room for every row's raw UID, made once, so a raw UID is copied without a check for room
  // (answer objects, whose texts may be longer, still ask for theirs: writeText)
  const rows = width === 0 ? 0 : status.length / width;
  const to = new Array<DataView>(2 * width);
  for (let i = 0; i < 2 * width; i++) to[i] = roomIn(i, 0, rows * RAW_UID_LENGTH);
  // whether a column took a longer text than a raw UID, after which its room is checked each time
  let texts = false;
  // the packed answers each column's last slot was in, and a view of their bytes: neighbours share a batch
  const lastOf = new Array<ScannedAnswers | null>(width).fill(null);
  const lastView = new Array<DataView>(width);
  const lengths = new Uint32Array(count * 2);
  const r = new Float64Array(count);
  let buckets: string[] | null = null;
  let unpaired: Map<number, string> | null = null;
  let k = 0;
  for (let slot = 0, c = 0; slot < status.length; slot++, c = c + 1 === width ? 0 : c + 1) {
    if (status[slot] !== SLOT.mapped) continue;
    const of = answerOf[slot] as MappedV3 | ScannedAnswers;
    if (of instanceof ScannedAnswers) {
      const i = answerIndex[slot];
      if (lastOf[c] !== of) {
        lastOf[c] = of;
        lastView[c] = viewOf(of.bytes);
      }
      const from = lastView[c];
      const uAt = of.uAt[i];
      const uTo = texts ? roomIn(2 * c, end[2 * c], RAW_UID_LENGTH) : to[2 * c];
      end[2 * c] = copyRawUid(from, uAt, uTo, end[2 * c]);
      lengths[2 * k] = RAW_UID_LENGTH;
      const pAt = of.pAt[i];
      if (pAt < 0) lengths[2 * k + 1] = NO_P;
      else {
        const pTo = texts ? roomIn(2 * c + 1, end[2 * c + 1], RAW_UID_LENGTH) : to[2 * c + 1];
        end[2 * c + 1] = copyRawUid(from, pAt, pTo, end[2 * c + 1]);
        lengths[2 * k + 1] = RAW_UID_LENGTH;
      }
      r[k] = of.r[i];
    } else {
      texts = true;
      lengths[2 * k] = writeText(of.u, 2 * c, end);
      if (lengths[2 * k] !== of.u.length && !isWellFormed(of.u)) (unpaired ??= new Map()).set(2 * k, of.u);
      if (of.p === null) lengths[2 * k + 1] = NO_P;
      else {
        lengths[2 * k + 1] = writeText(of.p, 2 * c + 1, end);
        if (lengths[2 * k + 1] !== of.p.length && !isWellFormed(of.p)) (unpaired ??= new Map()).set(2 * k + 1, of.p);
      }
      r[k] = of.r;
      const bucket = bucketIdOf(of);
      if (bucket !== null) (buckets ??= new Array<string>(count))[k] = bucket;
    }
    k++;
  }
  // a buffer of its own (never a slice of the shared pool), as a transfer takes the whole buffer
  let size = 0;
  for (let i = 0; i < 2 * width; i++) size += end[i];
  const bytes = Buffer.allocUnsafeSlow(size);
  const u: Uint8Array[] = [];
  const p: Uint8Array[] = [];
  for (let i = 0, at = 0; i < 2 * width; at += end[i], i++) {
    gathered[i].bytes.copy(bytes, at, 0, end[i]);
    (i % 2 === 0 ? u : p).push(new Uint8Array(bytes.buffer, at, end[i]));
  }
  return { status: status.slice(), reasonTexts, reasonOf, u, p, lengths, r, buckets, unpaired };
}

/**
 * The RAW_UID_LENGTH bytes of a raw UID from packed answers at `start` to `to` at `at`; where they end. Eight
 * bytes at a time, as doubles: the scanner let through base64 characters only (0x2B to 0x7A), so every eight
 * of them read as a double are a finite, normal number (its exponent bits are neither all ones nor all zeros),
 * which is written back bit for bit; half the reads and writes of copyWords on the main thread's hottest copy.
 */
function copyRawUid(from: DataView, start: number, to: DataView, at: number): number {
  to.setFloat64(at, from.getFloat64(start, true), true);
  to.setFloat64(at + 8, from.getFloat64(start + 8, true), true);
  to.setFloat64(at + 16, from.getFloat64(start + 16, true), true);
  to.setFloat64(at + 24, from.getFloat64(start + 24, true), true);
  to.setFloat64(at + 32, from.getFloat64(start + 32, true), true);
  to.setInt32(at + 40, from.getInt32(start + 40, true), true);
  return at + RAW_UID_LENGTH;
}

/** Writes a text's UTF-8 bytes at the end of gathered column `i`, and moves the end; how many it wrote. */
function writeText(text: string, i: number, end: Int32Array): number {
  // a UTF-16 unit is at most 3 bytes of UTF-8
  roomIn(i, end[i], 3 * text.length);
  // Buffer's own UTF-8 writer, without write()'s argument checks: a loop over char codes costs more
  const written = (gathered[i].bytes as Utf8Bytes).utf8Write(text, end[i]);
  end[i] += written;
  return written;
}

/** Buffer's own UTF-8 encoder into a range (what write(text, at, 'utf8') calls, without its checks). */
type Utf8Bytes = Buffer & { utf8Write(text: string, at: number): number };

/** Whether a text has no lone surrogate, so that its UTF-8 bytes read back as the same text. */
function isWellFormed(text: string): boolean {
  return (text as string & { isWellFormed(): boolean }).isWellFormed();
}

/** The buffers of packed answers, handed over with them rather than copied. */
export function answerBuffers(answers: SlotAnswers): ArrayBuffer[] {
  const buffers = [answers.status, answers.reasonOf, answers.lengths, answers.r].map((a) => a.buffer as ArrayBuffer);
  // every column's u and p are views of one buffer
  if (answers.u.length > 0) buffers.push(answers.u[0].buffer as ArrayBuffer);
  return buffers;
}

/** The answers as RowChunk holds them (v2 ones as BucketAnswers, which the v2 output reads the bucket from). */
export function unpackAnswers(answers: SlotAnswers): (MappedV3 | null)[] {
  const { status, lengths, r, buckets, unpaired } = answers;
  const width = answers.u.length;
  const asBuffer = (view: Uint8Array) => Buffer.from(view.buffer, view.byteOffset, view.byteLength);
  const us = answers.u.map(asBuffer);
  const ps = answers.p.map(asBuffer);
  const mapped = new Array<MappedV3 | null>(status.length).fill(null);
  const uAt = new Array<number>(width).fill(0);
  const pAt = new Array<number>(width).fill(0);
  let k = 0;
  for (let slot = 0, c = 0; slot < status.length; slot++, c = c + 1 === width ? 0 : c + 1) {
    if (status[slot] !== SLOT.mapped) continue;
    let u = us[c].toString('utf8', uAt[c], (uAt[c] += lengths[2 * k]));
    const pLength = lengths[2 * k + 1];
    let p = pLength === NO_P ? null : ps[c].toString('utf8', pAt[c], (pAt[c] += pLength));
    if (unpaired !== null) {
      u = unpaired.get(2 * k) ?? u;
      if (p !== null) p = unpaired.get(2 * k + 1) ?? p;
    }
    mapped[slot] = buckets !== null && buckets[k] !== undefined ? new BucketAnswer(u, buckets[k]) : { u, p, r: r[k] };
    k++;
  }
  return mapped;
}
