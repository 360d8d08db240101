/** Turns rows of text cells into the bytes of a Parquet file, typed by column, one row group at a time. */
import { ParquetCellError } from './parquet-cell-error.js';

export { ParquetCellError };
import { parquetMetadata } from 'hyparquet';
import { Compression, EnabledStatistics, Table, WriterPropertiesBuilder } from 'parquet-wasm';
import { type ArrowColumn, ArrowIpcWriter, type ArrowType } from './arrow-ipc.js';
import { ParquetStreamWriter } from './parquet-stream-writer.js';
import { type RowBlockView, utf8RowBlock, viewOfBlock } from '../row-blocks.js';
import type { ColumnType } from '../typed-cells.js';

/** What an encoder needs to know; plain data, so it can be handed to a worker thread. */
export interface ParquetLayout {
  header: readonly string[];
  types: readonly ColumnType[];
  /** Rows per row group (the last group holds the rest). */
  rowGroupRows: number;
}

/** The values of one typed (not text) column of a block, read as the block came. */
interface TypedCells {
  /** INT64 and TIMESTAMP values; for BOOLEAN, 1 or 0 in `flags`. */
  values: BigInt64Array | undefined;
  flags: Uint8Array | undefined;
  /** 1 where the cell held a value, 0 where it was empty (null). */
  present: Uint8Array;
}

/** A block waiting for its row group: its cells in place, where each column's bytes start, its typed values. */
interface WaitingBlock {
  view: RowBlockView;
  columnStarts: Float64Array;
  typed: (TypedCells | undefined)[];
}

/** Some rows of a waiting block. */
interface Span {
  block: WaitingBlock;
  first: number;
  count: number;
}

/**
 * Rows per record batch handed to the writer, which adds batches up into row groups. Smaller than a group, so
 * what waits here, and each batch's copies on its way into WebAssembly memory, stay small. Also the writer's own
 * write batch: it ends a data page only between write batches, once a page holds 20,000 rows (its limit), so
 * pages start at multiples of 10,000 rows, where the slices that parquet-source.ts reads start too, and no page
 * is decoded for more than two slices.
 */
const BATCH_ROWS = 10_000;

/**
 * Bytes at which the writer ends a data page before its 20,000 rows: above its own 1 MB, so that pages of cells
 * up to about 200 bytes still end on the rows above.
 */
const PAGE_BYTES = 4 * 1024 * 1024;

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
const TWO_32 = 4294967296;
const INT64_MAX = 2n ** 63n - 1n;
const INT64_MIN = -(2n ** 63n);

/**
 * Input cells become UTF-8 strings exactly as read ('' too); the tool's own columns become what they hold:
 * strings, INT64 ('integer', and 'unix_time' in seconds), BOOLEAN, and 'iso_time' as a UTC TIMESTAMP in
 * milliseconds; an empty cell of the tool's own columns becomes null. Rows wait as blocks of UTF-8 bytes (outside
 * the heap, not a string per cell) until a batch is full; then the batch goes to the writer as an Arrow record
 * batch, and the writer (compiled Rust, in WebAssembly) encodes and compresses it into the row group under way;
 * the bytes of each row group it completes are handed out.
 * The bytes come out in file order: the first start with the file's magic number, finish() returns the rest of
 * the file (the last group, the page indexes, the footer). Calls may overlap: they are carried out in order.
 */
export class ParquetEncoder {
  /** Started with the first batch, which tells the columns whose values repeat. */
  private writer: ParquetStreamWriter | undefined;
  private readonly ipc: ArrowIpcWriter;
  private readonly rowGroupRows: number;
  private readonly width: number;
  private waiting: Span[] = [];
  /** Rows of the current row group taken so far, written or waiting. */
  private inGroup = 0;
  private written = 0;
  private turn: Promise<unknown> = Promise.resolve();
  private lastIso = '';
  private lastIsoMs = 0;

  constructor(private readonly layout: ParquetLayout) {
    const { header, types } = layout;
    if (types.length !== header.length) throw new Error(`${types.length} column types for ${header.length} columns`);
    this.width = header.length;
    this.rowGroupRows = Math.max(1, Math.floor(layout.rowGroupRows));
    this.ipc = new ArrowIpcWriter(header.map((name, i) => ({ name, type: arrowType(types[i]) })));
  }

  /**
   * The writer, told which text columns get a dictionary by the first batch's cells (the same batch however the
   * rows arrive): a dictionary of values that do not repeat grows to its limit in every row group before the writer
   * gives it up, costing the writer, and every reader that reads a slice of a group, a dictionary page for nothing.
   */
  private writerFor(first: readonly Span[], rows: number): ParquetStreamWriter {
    const { header, types } = this.layout;
    let properties = new WriterPropertiesBuilder()
      .setCompression(Compression.SNAPPY)
      .setMaxRowGroupSize(this.rowGroupRows)
      .setWriteBatchSize(BATCH_ROWS)
      .setDataPageSizeLimit(PAGE_BYTES)
      .setCreatedBy('uid2-batch');
    header.forEach((name, c) => {
      if (!isText(types[c])) return;
      // min and max of text columns prune nothing in an export that is not sorted by them, and cost encoding time
      properties = properties.setColumnStatisticsEnabled(name, EnabledStatistics.None);
      if (!repeats(first, c, rows)) properties = properties.setColumnDictionaryEnabled(name, false);
    });
    return new ParquetStreamWriter(properties.build());
  }

  /** Takes rows; resolves with the bytes of the row groups they completed (empty when none was). */
  addRows(rows: readonly (readonly string[])[]): Promise<Uint8Array> {
    return this.addBlock(utf8RowBlock(rows, this.width));
  }

  /**
   * addRows() for rows made into a block by utf8RowBlock() (of this encoder's width). The typed cells are read
   * at once, so a cell that is not what its column says is refused on arrival.
   */
  addBlock(block: Uint8Array): Promise<Uint8Array> {
    let batches: Span[][];
    try {
      batches = this.take(this.waitingBlock(block));
    } catch (err) {
      return Promise.reject(err);
    }
    return this.inTurn(async () => {
      for (const batch of batches) await this.writeBatch(batch);
      return this.writer?.take() ?? new Uint8Array(0);
    });
  }

  /** The rest of the file. */
  finish(): Promise<Uint8Array> {
    const last = this.waiting;
    this.waiting = [];
    this.inGroup = 0;
    return this.inTurn(async () => {
      // a file with no rows still has its columns: the writer takes them from a batch of none
      if (last.length > 0 || this.writer === undefined) await this.writeBatch(last);
      const writer = this.writer as ParquetStreamWriter;
      await writer.close();
      const bytes = writer.take();
      this.checkRowCount(bytes);
      return bytes;
    });
  }

  private inTurn<T>(work: () => Promise<T>): Promise<T> {
    const run = this.turn.then(work);
    this.turn = run.catch(() => undefined);
    return run;
  }

  /**
   * Adds a block's rows to those waiting; returns the batches they completed. A row group is cut into batches of
   * BATCH_ROWS from its first row (the last batch of a group holds the rest), so the batches, and with them the
   * file's bytes, are the same whatever blocks the rows came in.
   */
  private take(block: WaitingBlock): Span[][] {
    const batches: Span[][] = [];
    const rows = block.view.rows;
    let first = 0;
    while (first < rows) {
      const cut = Math.min(this.rowGroupRows, (Math.floor(this.inGroup / BATCH_ROWS) + 1) * BATCH_ROWS);
      const count = Math.min(rows - first, cut - this.inGroup);
      this.waiting.push({ block, first, count });
      this.inGroup += count;
      first += count;
      if (this.inGroup === cut) {
        batches.push(this.waiting);
        this.waiting = [];
        if (this.inGroup === this.rowGroupRows) this.inGroup = 0;
      }
    }
    return batches;
  }

  private async writeBatch(spans: readonly Span[]): Promise<void> {
    let rows = 0;
    for (const span of spans) rows += span.count;
    this.writer ??= this.writerFor(spans, rows);
    const children = this.layout.types.map((type, c) =>
      isText(type) ? textColumn(spans, c, rows, type !== 'input') : typedColumn(spans, c, rows, type),
    );
    const table = Table.fromIPCStream(this.ipc.stream(rows, children));
    const batch = table.recordBatch(0);
    table.free();
    if (batch === undefined) throw new Error('an Arrow batch that did not survive the trip to the Parquet writer');
    await this.writer.write(batch);
    this.written += rows;
  }

  /** The writer drops a batch it cannot write without a word: a file that misses rows must not pass for whole. */
  private checkRowCount(tail: Uint8Array): void {
    const own = tail.buffer.slice(tail.byteOffset, tail.byteOffset + tail.byteLength) as ArrayBuffer;
    const rows = Number(parquetMetadata(own).num_rows);
    if (rows !== this.written) throw new Error(`the Parquet writer wrote ${rows} rows of ${this.written}`);
  }

  private waitingBlock(bytes: Uint8Array): WaitingBlock {
    const view = viewOfBlock(bytes);
    if (view.width !== this.width) throw new Error(`a block of ${view.width} columns for ${this.width}`);
    const { rows, lengths } = view;
    const columnStarts = new Float64Array(this.width + 1);
    for (let c = 0; c < this.width; c++) {
      let size = 0;
      for (let k = c * rows; k < (c + 1) * rows; k++) size += lengths[k];
      columnStarts[c + 1] = columnStarts[c] + size;
    }
    const block: WaitingBlock = { view, columnStarts, typed: [] };
    for (let c = 0; c < this.width; c++) {
      const type = this.layout.types[c];
      block.typed.push(isText(type) ? undefined : this.readTyped(block, c, type));
    }
    return block;
  }

  private readTyped(block: WaitingBlock, column: number, type: ColumnType): TypedCells {
    const { rows, lengths, bytes } = block.view;
    const present = new Uint8Array(rows);
    const boolean = type === 'boolean';
    const values = boolean ? undefined : new BigInt64Array(rows);
    const flags = boolean ? new Uint8Array(rows) : undefined;
    const words = values === undefined ? undefined : new Int32Array(values.buffer);
    let at = block.columnStarts[column];
    for (let r = 0; r < rows; r++) {
      const length = lengths[column * rows + r];
      const start = at;
      at += length;
      if (length === 0) continue;
      present[r] = 1;
      if (flags !== undefined) flags[r] = this.booleanAt(column, bytes, start, length);
      else if (type === 'iso_time') setInt64(values!, words!, r, this.timestampMs(column, bytes, start, length));
      else setInt64(values!, words!, r, this.wholeNumber(column, bytes, start, length));
    }
    return { values, flags, present };
  }

  private booleanAt(column: number, bytes: Uint8Array, start: number, length: number): number {
    const text = latin1(bytes, start, length);
    if (text === 'true') return 1;
    if (text === 'false') return 0;
    throw this.notA(column, 'boolean (true or false)');
  }

  /** A whole number in decimal: as a number while it is exact (15 digits), else as a bigint. */
  private wholeNumber(column: number, bytes: Uint8Array, start: number, length: number): number | bigint {
    const negative = bytes[start] === 0x2d;
    const digits = negative ? length - 1 : length;
    if (digits < 1 || digits > 19) throw this.notA(column, 'whole number');
    let value = 0;
    for (let k = start + (negative ? 1 : 0); k < start + length; k++) {
      const digit = bytes[k] - 0x30;
      if (digit < 0 || digit > 9) throw this.notA(column, 'whole number');
      value = value * 10 + digit;
    }
    if (digits <= 15) return negative ? -value : value;
    const big = BigInt(latin1(bytes, start, length));
    if (big > INT64_MAX || big < INT64_MIN) throw this.notA(column, 'whole number');
    return big;
  }

  /** An ISO time cell as UTC milliseconds; the tool writes Unix seconds where no ISO text exists (beyond year 275760). */
  private timestampMs(column: number, bytes: Uint8Array, start: number, length: number): number | bigint {
    const cell = latin1(bytes, start, length);
    if (cell === this.lastIso) return this.lastIsoMs;
    if (/^-?\d+$/.test(cell)) {
      const seconds = this.wholeNumber(column, bytes, start, length);
      const ms = BigInt(seconds) * 1000n;
      if (ms > INT64_MAX || ms < INT64_MIN) throw this.notA(column, 'time');
      return ms;
    }
    const ms = Date.parse(cell);
    if (!Number.isFinite(ms)) throw this.notA(column, 'time');
    // times repeat from row to row (refresh times fall on UTC midnights): the last one is kept
    this.lastIso = cell;
    this.lastIsoMs = ms;
    return ms;
  }

  private notA(column: number, what: string): ParquetCellError {
    return new ParquetCellError(this.layout.header[column], what);
  }
}

function arrowType(type: ColumnType): ArrowType {
  switch (type) {
    case 'integer':
    case 'unix_time':
      return 'int64';
    case 'boolean':
      return 'bool';
    case 'iso_time':
      return 'timestamp-ms-utc';
    default:
      return 'utf8';
  }
}

/** Cells looked at to tell whether a column's values repeat. */
const SAMPLE_CELLS = 1000;

/**
 * Whether the values of a text column repeat enough for a dictionary to pay: the distinct values of an even
 * sample of its cells take at most 40% of the sample's bytes (with their 4-byte lengths).
 */
function repeats(spans: readonly Span[], column: number, rows: number): boolean {
  const sample = Math.min(rows, SAMPLE_CELLS);
  const seen = new Set<string>();
  let total = 0;
  let distinct = 0;
  let taken = 0;
  let row = 0;
  for (const { block, first, count } of spans) {
    const { rows: blockRows, lengths, bytes } = block.view;
    const base = column * blockRows;
    let start = block.columnStarts[column];
    for (let k = base; k < base + first; k++) start += lengths[k];
    for (let k = base + first; k < base + first + count; k++, row++) {
      const length = lengths[k];
      const at = sample === 1 ? 0 : Math.floor((taken * (rows - 1)) / (sample - 1));
      if (taken < sample && row === at) {
        taken++;
        total += length + 4;
        const text = latin1(bytes, start, length);
        if (!seen.has(text)) {
          seen.add(text);
          distinct += length + 4;
        }
      }
      start += length;
    }
  }
  return total > 0 && distinct <= 0.4 * total;
}

/** Whether a column is written as UTF-8 text. */
function isText(type: ColumnType): boolean {
  return type === 'input' || type === 'string';
}

function latin1(bytes: Uint8Array, start: number, length: number): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset + start, length).toString('latin1');
}

/** Stores a 64-bit integer; one that a number holds exactly is written as two 32-bit words, without a bigint. */
function setInt64(values: BigInt64Array, words: Int32Array, at: number, value: number | bigint): void {
  if (typeof value === 'bigint' || !LITTLE_ENDIAN) {
    values[at] = BigInt(value);
    return;
  }
  words[2 * at] = (value % TWO_32) | 0;
  words[2 * at + 1] = Math.floor(value / TWO_32);
}

/**
 * A text column of a batch: the offsets of its cells, and its bytes as views of the blocks they wait in (the
 * stream copies them once); empty is null when `emptyIsNull`.
 */
function textColumn(spans: readonly Span[], column: number, rows: number, emptyIsNull: boolean): ArrowColumn {
  const offsets = new Int32Array(rows + 1);
  const validity = emptyIsNull ? new Uint8Array((rows + 7) >> 3) : undefined;
  let nulls = 0;
  let n = 0;
  let size = 0;
  const data: Uint8Array[] = [];
  for (const { block, first, count } of spans) {
    const { rows: blockRows, lengths, bytes } = block.view;
    const base = column * blockRows;
    let start = block.columnStarts[column];
    for (let k = base; k < base + first; k++) start += lengths[k];
    const runStart = size;
    for (let k = base + first; k < base + first + count; k++) {
      const length = lengths[k];
      size += length;
      offsets[++n] = size;
      if (validity !== undefined) {
        if (length === 0) nulls++;
        else validity[(n - 1) >> 3] |= 1 << ((n - 1) & 7);
      }
    }
    data.push(bytes.subarray(start, start + size - runStart));
  }
  return { nullCount: nulls, validity, offsets, data };
}

/** A typed column of a batch, from the values read as its blocks came. */
function typedColumn(spans: readonly Span[], column: number, rows: number, type: ColumnType): ArrowColumn {
  const validity = new Uint8Array((rows + 7) >> 3);
  const boolean = type === 'boolean';
  const values = boolean ? undefined : new BigInt64Array(rows);
  const flags = boolean ? new Uint8Array((rows + 7) >> 3) : undefined;
  let nulls = 0;
  let n = 0;
  for (const { block, first, count } of spans) {
    const cells = block.typed[column] as TypedCells;
    if (values !== undefined) values.set((cells.values as BigInt64Array).subarray(first, first + count), n);
    for (let r = first; r < first + count; r++, n++) {
      if (cells.present[r] === 0) {
        nulls++;
        continue;
      }
      validity[n >> 3] |= 1 << (n & 7);
      if (flags !== undefined && (cells.flags as Uint8Array)[r] === 1) flags[n >> 3] |= 1 << (n & 7);
    }
  }
  return { nullCount: nulls, validity, data: [flags ?? (values as BigInt64Array)] };
}
