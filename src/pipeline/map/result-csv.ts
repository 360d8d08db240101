/** A plain CSV or TSV piece's output bytes: each input line's bytes, then its result cells, written into a reused buffer. */
import { isAscii, isUtf8 } from 'node:buffer';
import type { ByteColumn } from '../io/row-blocks.js';
import { timeCell, type TimeFormat } from '../io/typed-cells.js';
import {
  NO_P,
  type PackedAnswers,
  type ResultBytesInput,
  resultByteColumns,
  writeInt32Decimal,
} from './result-bytes.js';
import type { ResultLayout } from './result-columns.js';
import { SLOT, SLOT_STATUS_NAMES } from './row-chunk.js';
import { copyWords, viewOf } from '../io/word-copy.js';

const COMMA = 0x2c;
const TAB = 0x09;
const QUOTE = 0x22;
const LF = 0x0a;
const CR = 0x0d;

/**
 * The output of a piece: its rows' bytes, and those of its --rejects rows (null when none is rejected). `bytes`
 * is a view from the start of a buffer of its own, longer than the bytes, to be handed over whole and, once
 * written, given back as the next piece's `into`.
 */
export interface CsvPieceBytes {
  bytes: Uint8Array;
  rejectBytes: Uint8Array | null;
}

/** What a piece is written from, beyond its answers. */
export interface CsvPieceInput extends Omit<ResultBytesInput, 'rowCount'> {
  /** The piece's bytes: whole records of a comma-separated UTF-8 input. */
  piece: Uint8Array;
  /** Cells per input row (the header's). */
  inputWidth: number;
  /** The result layout; its --keep input columns too. */
  layout: Pick<ResultLayout, 'emitHash' | 'hashEncoding' | 'timeFormat' | 'keep'>;
  /** Whether to write the --rejects rows too. */
  rejects: boolean;
  /**
   * The delimiter of the input's lines and of the output's (the same): ',' (CSV, the default) or a tab (TSV, quoted
   * by the same rule with the tab in the comma's place: io/output/tsv-encoder.ts).
   */
  delimiter?: ',' | '\t' | undefined;
  /**
   * A line whose cell count is not the header's, as the CSV text of its fitted cells (without its '\n'): such a
   * line is fitted as parsing it would, which this module leaves to the caller.
   */
  fitLine: (line: string) => string;
  /**
   * A buffer an earlier piece was written into, given back once its bytes were written: written into again when
   * it is long enough. A fresh buffer per piece would be megabytes of memory to map and fault in every time.
   */
  into?: ArrayBuffer | undefined;
}

/**
 * A buffer of at least `size` bytes: `into` when it is that long, else a new one with room to spare, so that it
 * can be given back for the next pieces, whose longest output varies a little from piece to piece.
 */
function scratch(size: number, into: ArrayBuffer | undefined): Buffer {
  if (into !== undefined && into.byteLength >= size) return Buffer.from(into, 0, into.byteLength);
  return Buffer.allocUnsafeSlow(size + (size >> 2));
}

/**
 * The output rows of a piece whose input is UTF-8 CSV without a quote, written with the input's delimiter (CSV in
 * and out, or TSV in and out): a line of the header's width is, as it is, the text of its cells (no quote,
 * delimiter or line break can be in one), so its bytes are copied (or those of its --keep cells, in their order);
 * the result cells follow, each quoted only when it holds a quote, the delimiter or a line break, as csv-stringify
 * would (a field's quoting never depends on its neighbours). The same bytes as encoding each output row with
 * encodeCsvRow (encodeTsvRow). Undefined when the piece is not such an input (a quote, bytes that are not UTF-8),
 * an answer is not ASCII or no input column is kept: the caller then encodes rows of strings.
 */
export function csvPieceBytes(answers: PackedAnswers, input: CsvPieceInput): CsvPieceBytes | undefined {
  const { piece, inputWidth, width } = input;
  const keep = input.layout.keep;
  // with no input column kept, a row would start with its first result cell, not with a comma
  if (keep !== null && keep.length === 0) return undefined;
  if (piece.indexOf(QUOTE) !== -1 || !isUtf8(piece)) return undefined;
  const d = input.delimiter === '\t' ? TAB : COMMA;
  const kept = new KeptCells(keep ?? [], inputWidth, input.fitLine, d);
  const rowCount = answers.status.length / Math.max(1, width);
  const cells = SlotCells.of(answers, input, d) ?? ColumnCells.of(answers, { ...input, rowCount }, d);
  if (cells === undefined) return undefined;
  // room for every row at its longest: its line fitted (at most a comma per missing cell more), its result cells,
  // and the '\n'
  const out = scratch(piece.length + rowCount * (inputWidth + 1) + cells.maxBytes, input.into);
  const view = viewOf(out);
  const pieceView = viewOf(piece);
  const status = answers.status;
  const rejectedRows: number[] = [];
  let at = 0;
  let row = 0;
  for (let start = 0; start < piece.length; ) {
    const end = keep === null ? copyLine(piece, pieceView, start, out, view, at, d) : scanLine(piece, start, d);
    const next = end + (piece[end] === CR && piece[end + 1] === LF ? 2 : 1);
    if (end === start) {
      // an empty line is no record
      start = next;
      continue;
    }
    if (row === rowCount) throw new Error(`a piece with more lines than its ${rowCount} answered rows`);
    const rowStart = at;
    if (keep === null) {
      if (line.delimiters === inputWidth - 1) at += end - start;
      else {
        const text = Buffer.from(piece.buffer, piece.byteOffset + start, end - start).toString('utf8');
        at += out.write(input.fitLine(text), at, 'utf8');
      }
    } else at = kept.write(piece, start, end, line.delimiters === inputWidth - 1, out, rowStart);
    at = cells.write(row, out, view, at);
    out[at++] = LF;
    if (input.rejects && isRejected(status, row, width)) rejectedRows.push(rowStart, at);
    row++;
    start = next;
  }
  if (row !== rowCount) throw new Error(`a piece with ${row} lines for its ${rowCount} answered rows`);
  return { bytes: new Uint8Array(out.buffer, 0, at), rejectBytes: copyRows(out, rejectedRows) };
}

/**
 * --keep: the kept input cells of a line, in --keep's order. A plain line's cells hold no quote, delimiter or line
 * break, so each is written as it is; a line of another width is fitted first.
 */
class KeptCells {
  /** Where each cell of the line starts, and one past the last cell's end (as if a comma followed it). */
  private readonly starts: Int32Array;

  constructor(
    private readonly keep: readonly number[],
    private readonly inputWidth: number,
    private readonly fitLine: (line: string) => string,
    private readonly delimiter: number,
  ) {
    this.starts = new Int32Array(inputWidth + 1);
  }

  /** The kept cells of the line of `piece` from `start` to `end`, to `out` at `at`; where they end. `plain`: the line has the input's width. */
  write(piece: Uint8Array, start: number, end: number, plain: boolean, out: Buffer, at: number): number {
    if (!plain) {
      const text = Buffer.from(piece.buffer, piece.byteOffset + start, end - start).toString('utf8');
      const line = Buffer.from(this.fitLine(text), 'utf8');
      return this.write(line, 0, line.length, true, out, at);
    }
    const starts = this.starts;
    let cell = 0;
    starts[0] = start;
    const d = this.delimiter;
    for (let i = start; i < end; i++) if (piece[i] === d) starts[++cell] = i + 1;
    starts[this.inputWidth] = end + 1;
    const keep = this.keep;
    for (let k = 0; k < keep.length; k++) {
      if (k > 0) out[at++] = d;
      const c = keep[k];
      at = copy(piece, starts[c], starts[c + 1] - 1, out, at);
    }
    return at;
  }
}

/** The delimiters of the line copyLine() or scanLine() went over last. */
const line = { delimiters: 0 };

/**
 * Copies the line that starts at `start` (without its line break) to `out` at `at`, counting its delimiters `d` as
 * it goes; where it ends. `pieceView` and `outView` are views of `piece` and `out`. A word of four bytes at a time:
 * the bytes of a word that equal a line break or the delimiter are found with a few integer operations on the whole
 * word, where a loop over single bytes makes three comparisons and a store per byte; the word that holds the line
 * break, and the last bytes of the piece, go byte by byte.
 */
function copyLine(
  piece: Uint8Array,
  pieceView: DataView,
  start: number,
  out: Buffer,
  outView: DataView,
  at: number,
  d: number,
): number {
  let delimiters = 0;
  let i = start;
  const dWord = Math.imul(d, 0x01010101);
  for (const last = piece.length - 4; i <= last; i += 4, at += 4) {
    const word = pieceView.getInt32(i, true);
    if ((zeroBytes(word ^ 0x0a0a0a0a) | zeroBytes(word ^ 0x0d0d0d0d)) !== 0) break;
    // one bit per delimiter, at the bottom of its byte: the multiply adds the four bytes into the top one
    delimiters += Math.imul(zeroBytes(word ^ dWord) >>> 7, 0x01010101) >>> 24;
    outView.setInt32(at, word, true);
  }
  for (; i < piece.length; i++) {
    const b = piece[i];
    if (b === LF || b === CR) break;
    if (b === d) delimiters++;
    out[at++] = b;
  }
  line.delimiters = delimiters;
  return i;
}

/** The top bit of each byte of `word` that is zero, and no other bit (exact: no carry from byte to byte). */
function zeroBytes(word: number): number {
  return ~(((word & 0x7f7f7f7f) + 0x7f7f7f7f) | word | 0x7f7f7f7f);
}

/** Where the line that starts at `start` ends (its line break), counting its delimiters as copyLine() does. */
function scanLine(piece: Uint8Array, start: number, d: number): number {
  let delimiters = 0;
  let i = start;
  for (; i < piece.length; i++) {
    const b = piece[i];
    if (b === LF || b === CR) break;
    if (b === d) delimiters++;
  }
  line.delimiters = delimiters;
  return i;
}

/** The rows of `out` whose starts and ends `ranges` holds, one after another in a buffer of their own. */
function copyRows(out: Buffer, ranges: readonly number[]): Uint8Array | null {
  if (ranges.length === 0) return null;
  let size = 0;
  for (let i = 0; i < ranges.length; i += 2) size += ranges[i + 1] - ranges[i];
  const rows = new Uint8Array(size);
  let at = 0;
  for (let i = 0; i < ranges.length; i += 2) {
    rows.set(out.subarray(ranges[i], ranges[i + 1]), at);
    at += ranges[i + 1] - ranges[i];
  }
  return rows;
}

/** Whether any of the bytes from `start` to `end` is a quote, the delimiter `d` or a line break. */
function needsQuoting(bytes: Uint8Array, start: number, end: number, d: number): boolean {
  for (let i = start; i < end; i++) {
    const b = bytes[i];
    if (b === d || b === QUOTE || b === LF || b === CR) return true;
  }
  return false;
}

/** A cell between quotes, its quotes doubled, as csv-stringify quotes a field; where `out` continues. */
function writeQuoted(out: Buffer, bytes: Uint8Array, start: number, end: number, at: number): number {
  out[at++] = QUOTE;
  for (let i = start; i < end; i++) {
    const b = bytes[i];
    if (b === QUOTE) out[at++] = QUOTE;
    out[at++] = b;
  }
  out[at++] = QUOTE;
  return at;
}

/** A row is a --rejects row when one of its identifier cells is neither mapped nor missing. */
function isRejected(status: Uint8Array, row: number, width: number): boolean {
  for (let slot = row * width; slot < (row + 1) * width; slot++)
    if (status[slot] !== SLOT.mapped && status[slot] !== SLOT.missing) return true;
  return false;
}

/** What writes a row's result cells, each after its comma. */
interface ResultCells {
  /** The most bytes all rows' result cells take. */
  readonly maxBytes: number;
  /** Writes the result cells of `row` to `out` (whose view `to` is) at `at`; where they end. */
  write(row: number, out: Buffer, to: DataView, at: number): number;
}

/** Bytes of a refresh_from cell at most: ISO text, or a number as String() writes one. */
const TIME_BYTES = 32;
/** Whole numbers up to this size are written digit by digit; others as timeCell() writes them. */
const INT32_MAX = 0x7fffffff;

/**
 * The result cells of the default v3 layout (raw_uid, prev_raw_uid, refresh_from, status, reason per identifier
 * column, without --emit-hash), written slot by slot straight from the packed answers: a mapped slot is its u,
 * its p, its time and `mapped` with an empty reason; any other slot is the same few bytes for each status and
 * reason, made once per piece.
 */
class SlotCells implements ResultCells {
  private readonly uAt: Uint32Array;
  private readonly pAt: Uint32Array;
  /** The mapped slots written so far. */
  private k = 0;
  /** The last refresh_from written, and its cell's bytes. */
  private lastTime = Number.NaN;
  private readonly timeBytes = Buffer.alloc(TIME_BYTES);
  private readonly timeView = viewOf(this.timeBytes);
  private timeLength = 0;

  private constructor(
    private readonly answers: PackedAnswers,
    private readonly width: number,
    private readonly timeFormat: TimeFormat,
    private readonly u: readonly DataView[],
    private readonly p: readonly DataView[],
    /** Per status and reason (status * (reasons + 1) + reasonOf), the cells of a slot that is not mapped. */
    private readonly tails: DataView,
    /** Where each tail starts in `tails`, and where the last one ends. */
    private readonly tailAt: Int32Array,
    readonly maxBytes: number,
    /** The delimiter, and the cells of a mapped slot after its time: the delimiter, `mapped` and the delimiter. */
    private readonly d: number,
    private readonly mappedTail: DataView,
  ) {
    this.uAt = new Uint32Array(width);
    this.pAt = new Uint32Array(width);
  }

  /** Undefined for another layout, or when some u or p would need quoting or is not ASCII (never from a service). */
  static of(answers: PackedAnswers, input: Omit<ResultBytesInput, 'rowCount'>, d: number): SlotCells | undefined {
    const { width, v2, layout } = input;
    if (v2 || layout.emitHash || answers.u.length !== width || answers.p.length !== width) return undefined;
    if (!answers.u.every((bytes) => isPlain(bytes, d)) || !answers.p.every((bytes) => isPlain(bytes, d)))
      return undefined;
    const reasons = ['', ...answers.reasonTexts];
    const tails: Buffer[] = [];
    for (const name of SLOT_STATUS_NAMES)
      for (const reason of reasons)
        tails.push(Buffer.from(['', '', '', '', name, csvField(reason, d)].join(String.fromCharCode(d)), 'utf8'));
    const tailAt = new Int32Array(tails.length + 1);
    let longestTail = 0;
    for (let i = 0; i < tails.length; i++) {
      tailAt[i + 1] = tailAt[i] + tails[i].length;
      longestTail = Math.max(longestTail, tails[i].length);
    }
    let textBytes = 0;
    for (let c = 0; c < width; c++) textBytes += answers.u[c].byteLength + answers.p[c].byteLength;
    const slots = answers.status.length;
    const mappedTail = Buffer.from(['', 'mapped', ''].join(String.fromCharCode(d)), 'latin1');
    const maxBytes = textBytes + slots * Math.max(longestTail, 3 + TIME_BYTES + mappedTail.length);
    return new SlotCells(
      answers,
      width,
      layout.timeFormat,
      answers.u.map(viewOf),
      answers.p.map(viewOf),
      viewOf(Buffer.concat(tails)),
      tailAt,
      maxBytes,
      d,
      viewOf(mappedTail),
    );
  }

  write(row: number, out: Buffer, to: DataView, at: number): number {
    const { status, lengths, reasonOf } = this.answers;
    const d = this.d;
    const reasons = this.answers.reasonTexts.length + 1;
    for (let c = 0; c < this.width; c++) {
      const slot = row * this.width + c;
      const s = status[slot];
      if (s !== SLOT.mapped) {
        const tail = s * reasons + reasonOf[slot];
        at = copyWords(this.tails, this.tailAt[tail], this.tailAt[tail + 1], to, at);
        continue;
      }
      const k = this.k++;
      out[at++] = d;
      const uFrom = this.uAt[c];
      const uTo = uFrom + lengths[2 * k];
      this.uAt[c] = uTo;
      at = copyWords(this.u[c], uFrom, uTo, to, at);
      out[at++] = d;
      const pLength = lengths[2 * k + 1];
      if (pLength !== NO_P) {
        const pFrom = this.pAt[c];
        this.pAt[c] = pFrom + pLength;
        at = copyWords(this.p[c], pFrom, pFrom + pLength, to, at);
      }
      out[at++] = d;
      this.time(this.answers.r[k]);
      at = copyWords(this.timeView, 0, this.timeLength, to, at);
      at = copyWords(this.mappedTail, 0, this.mappedTail.byteLength, to, at);
    }
    return at;
  }

  /** A refresh_from cell's bytes, in timeBytes; times repeat from slot to slot, so the last one's are kept. */
  private time(r: number): void {
    if (r === this.lastTime) return;
    this.lastTime = r;
    const seconds = Math.floor(r);
    if (this.timeFormat !== 'unix' || !(Math.abs(seconds) <= INT32_MAX)) {
      this.timeLength = this.timeBytes.write(timeCell(r, this.timeFormat), 0, 'latin1');
      return;
    }
    this.timeLength = writeInt32Decimal(this.timeBytes, 0, seconds);
  }
}

/** Whether raw UID bytes are ASCII and need no quoting (no quote, delimiter `d` or line break). */
function isPlain(view: Uint8Array, d: number): boolean {
  if (!isAscii(view)) return false;
  const bytes = Buffer.from(view.buffer, view.byteOffset, view.byteLength);
  for (const special of [d, QUOTE, LF, CR]) if (bytes.indexOf(special) !== -1) return false;
  return true;
}

/** Bytes `from` to `to` (-1: the end) of `bytes` to `out` at `at`; where they end. */
function copy(bytes: Uint8Array, from: number, to: number, out: Buffer, at: number): number {
  const end = to === -1 ? bytes.length : to;
  // cells are short: a loop copies them faster than a call that copies a range
  for (let i = from; i < end; i++) out[at++] = bytes[i];
  return at;
}

/**
 * A field as csv-stringify writes it with the delimiter `d`: between quotes, its quotes doubled, when it holds a
 * quote, the delimiter or a line break.
 */
function csvField(text: string, d: number): string {
  return /["\n\r]/.test(text) || text.includes(String.fromCharCode(d)) ? `"${text.replace(/"/g, '""')}"` : text;
}

/** The result cells of any layout, from the result columns in bytes (result-bytes.ts). */
class ColumnCells implements ResultCells {
  /** Per column, where its next cell starts. */
  private readonly at: Uint32Array;

  /** Per column, a view of its bytes. */
  private readonly views: readonly DataView[];

  private constructor(
    private readonly columns: readonly ByteColumn[],
    /** Per column, whether some of its cells need quoting. */
    private readonly quoting: readonly boolean[],
    readonly maxBytes: number,
    private readonly d: number,
  ) {
    this.at = new Uint32Array(columns.length);
    this.views = columns.map((column) => viewOf(column.bytes));
  }

  /** Undefined when some u or p is not ASCII (see resultByteColumns). */
  static of(answers: PackedAnswers, input: ResultBytesInput, d: number): ColumnCells | undefined {
    const columns = resultByteColumns(answers, input);
    if (columns === undefined) return undefined;
    let cellBytes = 0;
    for (const column of columns) cellBytes += column.bytes.length;
    // each cell quoted: at most twice its bytes, two quotes and its comma
    const maxBytes = 2 * cellBytes + 3 * columns.length * input.rowCount;
    return new ColumnCells(
      columns,
      columns.map((column) => needsQuoting(column.bytes, 0, column.bytes.length, d)),
      maxBytes,
      d,
    );
  }

  write(row: number, out: Buffer, view: DataView, at: number): number {
    const columns = this.columns;
    for (let c = 0; c < columns.length; c++) {
      const bytes = columns[c].bytes;
      const from = this.at[c];
      const to = from + columns[c].lengths[row];
      this.at[c] = to;
      out[at++] = this.d;
      if (this.quoting[c] && needsQuoting(bytes, from, to, this.d)) at = writeQuoted(out, bytes, from, to, at);
      else at = copyWords(this.views[c], from, to, view, at);
    }
    return at;
  }
}
