/** Turns rows of text cells into the bytes of a Parquet file, typed by column, one row group at a time. */
import { ByteWriter, ParquetWriter } from 'hyparquet-writer';
import { writeColumn } from 'hyparquet-writer/src/column.js';
import { packRows, type PackedRows } from './row-encoders.js';
import type { ColumnType } from './typed-cells.js';

type SchemaElement = ConstructorParameters<typeof ParquetWriter>[0]['schema'][number];
type ColumnEncoder = Parameters<typeof writeColumn>[0]['column'];
type Value = Uint8Array | bigint | boolean | null;

/** Values of a data page before it is split; the writer's own default. */
const PAGE_BYTES = 1024 * 1024;

/** What an encoder needs to know; plain data, so it can be handed to a worker thread. */
export interface ParquetLayout {
  header: readonly string[];
  types: readonly ColumnType[];
  /** Rows per row group (the last group holds the rest). */
  rowGroupRows: number;
}

/**
 * A cell of one of the tool's own columns that is not what its type says: a bug of the tool, not of the input.
 * Plain fields, so it survives the trip back from a worker thread.
 */
export class ParquetCellError extends Error {
  constructor(
    readonly column: string,
    readonly expected: string,
  ) {
    super(`column '${column}' holds a value that is not a ${expected}`);
    this.name = 'ParquetCellError';
  }
}

/** Rows as the UTF-8 bytes of their cells, one buffer for all, and where each cell is in it. */
interface Utf8Rows {
  bytes: Buffer;
  /** Byte offset of cell c of row r at r * width + c; a row's missing cells are empty. */
  starts: Uint32Array;
  lengths: Uint32Array;
  rows: number;
}

/** Some rows of a Utf8Rows. */
interface RowSpan {
  rows: Utf8Rows;
  first: number;
  count: number;
}

/**
 * Input cells become UTF-8 strings exactly as read ('' too); the tool's own columns become what they hold:
 * strings, INT64 ('integer', and 'unix_time' in seconds), BOOLEAN, and 'iso_time' as a UTC TIMESTAMP in
 * milliseconds; an empty cell of the tool's own columns becomes null. Rows wait as UTF-8 bytes (outside the
 * heap, not a string per cell) until a row group is full; then the group is encoded column after column and its
 * bytes handed out, so memory is bounded by one row group. The bytes come out in file order: the first bytes
 * start with the file's magic number, finish() returns the rest of the file (the last group, the page indexes,
 * the footer).
 */
export class ParquetEncoder {
  private readonly out = new ByteWriter(1024 * 1024);
  private readonly parquet: ParquetWriter;
  private readonly encoders: ColumnEncoder[];
  private readonly rowGroupRows: number;
  private readonly width: number;
  private spans: RowSpan[] = [];
  /** The values of the typed (not text) columns of the rows waiting, read as the rows come. */
  private typed: Value[][];
  private buffered = 0;
  private lastIso = '';
  private lastIsoMs = 0n;

  constructor(private readonly layout: ParquetLayout) {
    const { header, types } = layout;
    if (types.length !== header.length) throw new Error(`${types.length} column types for ${header.length} columns`);
    const schema: SchemaElement[] = [
      { name: 'root', num_children: header.length },
      ...header.map((name, i) => schemaElement(name, types[i])),
    ];
    this.parquet = new ParquetWriter({ writer: this.out, schema, codec: 'SNAPPY', createdBy: 'uid2-batch' });
    this.encoders = header.map((name, i) => ({
      columnName: name,
      element: schema[i + 1],
      schemaPath: [schema[0], schema[i + 1]],
      codec: 'SNAPPY',
      compressors: this.parquet.compressors,
      // min and max of text columns prune nothing in an export that is not sorted by them, and cost encoding time
      stats: !isText(types[i]),
      pageSize: PAGE_BYTES,
      columnIndex: false,
      offsetIndex: true,
    }));
    this.rowGroupRows = Math.max(1, Math.floor(layout.rowGroupRows));
    this.width = header.length;
    this.typed = header.map(() => []);
  }

  /** Takes rows; returns the bytes of the row groups they completed (empty when none was). */
  addRows(rows: readonly (readonly string[])[]): Uint8Array {
    return this.addPacked(packRows(rows));
  }

  /** addRows() for rows packed by packRows(). */
  addPacked(packed: PackedRows): Uint8Array {
    return this.addUtf8(utf8Rows(packed, this.width));
  }

  /** addRows() for rows made into a block by utf8RowBlock() (of this encoder's width). */
  addBlock(block: Uint8Array): Uint8Array {
    return this.addUtf8(rowsOfBlock(block, this.width));
  }

  private addUtf8(rows: Utf8Rows): Uint8Array {
    let first = 0;
    while (first < rows.rows) {
      const count = Math.min(rows.rows - first, this.rowGroupRows - this.buffered);
      const span = { rows, first, count };
      this.readTyped(span);
      this.spans.push(span);
      this.buffered += count;
      first += count;
      if (this.buffered >= this.rowGroupRows) this.encodeGroup();
    }
    return this.take();
  }

  /** The rest of the file. */
  finish(): Uint8Array {
    if (this.buffered > 0) this.encodeGroup();
    this.parquet.finish();
    return this.take();
  }

  /** The bytes made since the last call: a copy, as the writer reuses its buffer for the next group. */
  private take(): Uint8Array {
    const bytes = this.out.getBytes().slice();
    this.out.index = 0;
    return bytes;
  }

  /**
   * One row group, column after column (what the writer's own write() does for a flat schema), so that only one
   * column's values exist at a time; text goes in as views of the rows' UTF-8 bytes, not a buffer per cell.
   */
  private encodeGroup(): void {
    const rows = this.buffered;
    const spans = this.spans;
    const typed = this.typed;
    this.spans = [];
    this.typed = this.layout.header.map(() => []);
    this.buffered = 0;
    const start = this.out.offset;
    const chunks = [];
    let uncompressed = 0n;
    for (let c = 0; c < this.width; c++) {
      const values = isText(this.layout.types[c]) ? this.textValues(c, spans, rows) : typed[c];
      const definitionLevels = new Array<number>(rows);
      for (let r = 0; r < rows; r++) definitionLevels[r] = values[r] === null ? 0 : 1;
      const written = writeColumn({
        writer: this.out,
        column: this.encoders[c],
        pageData: { values, definitionLevels, repetitionLevels: [], maxDefinitionLevel: 1 },
      });
      ownStatistics(written.chunk.meta_data?.statistics);
      chunks.push(written.chunk);
      this.parquet.pendingIndexes.push(written);
      uncompressed += written.chunk.meta_data?.total_uncompressed_size ?? 0n;
    }
    this.parquet.row_groups.push({
      columns: chunks,
      total_byte_size: uncompressed,
      num_rows: BigInt(rows),
      total_compressed_size: BigInt(this.out.offset - start),
    });
    this.parquet.num_rows += BigInt(rows);
  }

  /**
   * A text column's cells; an empty cell of the tool's own is null. A column whose values repeat (statuses,
   * dates) goes in as strings: the writer builds its dictionary from them by value, which costs far less than by
   * the bytes of each cell. Other columns go in as views of the rows' UTF-8 bytes, written as they are.
   */
  private textValues(column: number, spans: readonly RowSpan[], count: number): Value[] {
    const emptyIsNull = this.layout.types[column] !== 'input';
    const asStrings = repeats(column, this.width, spans, count);
    const width = this.width;
    const values = new Array<Value | string>(count);
    let n = 0;
    for (const { rows, first, count: spanRows } of spans) {
      const { bytes, starts, lengths } = rows;
      for (let r = first; r < first + spanRows; r++) {
        const k = r * width + column;
        const length = lengths[k];
        if (length === 0) values[n++] = emptyIsNull ? null : asStrings ? '' : EMPTY;
        else if (asStrings) values[n++] = bytes.toString('utf8', starts[k], starts[k] + length);
        else values[n++] = new Uint8Array(bytes.buffer, bytes.byteOffset + starts[k], length);
      }
    }
    return values as Value[];
  }

  /** Reads the typed cells of new rows at once, so a cell that is not what its column says is refused on arrival. */
  private readTyped({ rows, first, count }: RowSpan): void {
    const { bytes, starts, lengths } = rows;
    for (let c = 0; c < this.width; c++) {
      if (isText(this.layout.types[c])) continue;
      const values = this.typed[c];
      for (let r = first; r < first + count; r++) {
        const k = r * this.width + c;
        values.push(
          lengths[k] === 0 ? null : this.typedValue(c, bytes.toString('utf8', starts[k], starts[k] + lengths[k])),
        );
      }
    }
  }

  private typedValue(column: number, cell: string): bigint | boolean {
    switch (this.layout.types[column]) {
      case 'boolean':
        if (cell === 'true') return true;
        if (cell === 'false') return false;
        throw this.notA(column, 'boolean (true or false)');
      case 'iso_time':
        return this.timestampMs(column, cell);
      default:
        return this.wholeNumber(column, cell);
    }
  }

  private wholeNumber(column: number, cell: string): bigint {
    if (!/^-?\d{1,19}$/.test(cell)) throw this.notA(column, 'whole number');
    return BigInt(cell);
  }

  /** An ISO time cell as UTC milliseconds; the tool writes Unix seconds where no ISO text exists (beyond year 275760). */
  private timestampMs(column: number, cell: string): bigint {
    if (cell === this.lastIso) return this.lastIsoMs;
    const ms = /^-?\d+$/.test(cell) ? this.wholeNumber(column, cell) * 1000n : Date.parse(cell);
    if (typeof ms === 'number' && !Number.isFinite(ms)) throw this.notA(column, 'time');
    // times repeat from row to row (refresh times fall on UTC midnights): the last one is kept
    this.lastIso = cell;
    this.lastIsoMs = BigInt(ms);
    return this.lastIsoMs;
  }

  private notA(column: number, what: string): ParquetCellError {
    return new ParquetCellError(this.layout.header[column], what);
  }
}

const EMPTY = new Uint8Array(0);

/** Cells looked at to tell whether a column's values repeat. */
const SAMPLE_CELLS = 1000;

/**
 * Whether the values of a text column repeat enough for a dictionary to pay: the distinct values of an even
 * sample of its cells take at most 40% of the sample's bytes (the writer keeps a dictionary that halves the
 * column). Looser, more columns would go in as strings only to have their dictionary refused, and then each
 * string is encoded to UTF-8 on its own; see the encoder's CPU time in bench/formats.mjs runs.
 */
function repeats(column: number, width: number, spans: readonly RowSpan[], count: number): boolean {
  const sample = Math.min(count, SAMPLE_CELLS);
  const seen = new Set<string>();
  let total = 0;
  let distinct = 0;
  let span = 0;
  let spanStart = 0;
  for (let i = 0; i < sample; i++) {
    const at = sample === 1 ? 0 : Math.floor((i * (count - 1)) / (sample - 1));
    while (at >= spanStart + spans[span].count) spanStart += spans[span++].count;
    const { rows, first } = spans[span];
    const k = (first + at - spanStart) * width + column;
    const length = rows.lengths[k];
    const size = length + 4;
    total += size;
    const text = rows.bytes.toString('latin1', rows.starts[k], rows.starts[k] + length);
    if (!seen.has(text)) {
      seen.add(text);
      distinct += size;
    }
  }
  return total > 0 && distinct <= 0.4 * total;
}

/** Whether a column is written as UTF-8 text. */
function isText(type: ColumnType): boolean {
  return type === 'input' || type === 'string';
}

/**
 * Packed rows as UTF-8 bytes with the place of each cell. Text that is all ASCII (nearly always) is encoded in
 * one go and its characters are its bytes; other text is encoded cell by cell.
 */
function utf8Rows(packed: PackedRows, width: number): Utf8Rows {
  const { text, cellLengths, rowWidths } = packed;
  const rows = rowWidths.length;
  const starts = new Uint32Array(rows * width);
  const lengths = new Uint32Array(rows * width);
  let bytes = Buffer.from(text, 'utf8');
  const ascii = bytes.length === text.length;
  if (!ascii) bytes = Buffer.allocUnsafeSlow(text.length * 3);
  let chars = 0;
  let at = 0;
  let n = 0;
  for (let r = 0; r < rows; r++) {
    const given = rowWidths[r];
    for (let c = 0; c < given; c++) {
      const charLength = cellLengths[n++];
      // cells past the header's width are not written
      if (c >= width) {
        chars += charLength;
        continue;
      }
      const length = ascii ? charLength : bytes.write(text.slice(chars, chars + charLength), at, 'utf8');
      starts[r * width + c] = ascii ? chars : at;
      lengths[r * width + c] = length;
      chars += charLength;
      at += length;
    }
  }
  return { bytes, starts, lengths, rows };
}

/**
 * The writer keeps each chunk's min and max until the footer is written; as views they would keep all their rows'
 * bytes alive with them, so they become copies of their own.
 */
function ownStatistics(statistics: { min_value?: unknown; max_value?: unknown } | undefined): void {
  if (statistics === undefined) return;
  if (statistics.min_value instanceof Uint8Array) statistics.min_value = statistics.min_value.slice();
  if (statistics.max_value instanceof Uint8Array) statistics.max_value = statistics.max_value.slice();
}

function schemaElement(name: string, type: ColumnType): SchemaElement {
  switch (type) {
    case 'integer':
    case 'unix_time':
      return { name, type: 'INT64', repetition_type: 'OPTIONAL' };
    case 'boolean':
      return { name, type: 'BOOLEAN', repetition_type: 'OPTIONAL' };
    case 'iso_time':
      return {
        name,
        type: 'INT64',
        repetition_type: 'OPTIONAL',
        converted_type: 'TIMESTAMP_MILLIS',
        logical_type: { type: 'TIMESTAMP', isAdjustedToUTC: true, unit: 'MILLIS' },
      };
    default:
      return {
        name,
        type: 'BYTE_ARRAY',
        repetition_type: 'OPTIONAL',
        converted_type: 'UTF8',
        logical_type: { type: 'STRING' },
      };
  }
}

/** Words before a row block's cell lengths: its rows, its width. */
const BLOCK_HEAD = 2;

/**
 * Rows as one block of bytes, for a thread that made them to hand to the encoder without a string per cell
 * crossing: the row count and width, each cell's UTF-8 length (32 bits, little-endian), then the cells' UTF-8
 * bytes one after the other. Rows are fitted to `width` as addRows() fits them.
 */
export function utf8RowBlock(rows: readonly (readonly string[])[], width: number): Uint8Array {
  const cells = rows.length * width;
  const parts = new Array<string>(cells);
  let n = 0;
  for (const row of rows) for (let c = 0; c < width; c++) parts[n++] = row[c] ?? '';
  const text = parts.join('');
  const byteLength = Buffer.byteLength(text, 'utf8');
  const head = (BLOCK_HEAD + cells) * 4;
  // a buffer of its own (offset 0), so it can be handed over whole
  const block = Buffer.allocUnsafeSlow(head + byteLength);
  const words = new Uint32Array(block.buffer, block.byteOffset, BLOCK_HEAD + cells);
  words[0] = rows.length;
  words[1] = width;
  // all ASCII (nearly always): a cell's characters are its bytes
  const ascii = byteLength === text.length;
  for (let k = 0; k < cells; k++) words[BLOCK_HEAD + k] = ascii ? parts[k].length : Buffer.byteLength(parts[k], 'utf8');
  block.write(text, head, 'utf8');
  return new Uint8Array(block.buffer, block.byteOffset, block.byteLength);
}

/** The cells of a block made by utf8RowBlock(), as strings again. */
export function cellsOfBlock(block: Uint8Array): string[][] {
  const width = blockHead(block).width;
  const { bytes, starts, lengths, rows } = rowsOfBlock(block, width);
  const text = bytes.toString('utf8');
  // all ASCII: characters are bytes, and the cells are slices of one string
  const ascii = text.length === bytes.length;
  const out: string[][] = new Array(rows);
  for (let r = 0; r < rows; r++) {
    const cells = new Array<string>(width);
    for (let c = 0; c < width; c++) {
      const k = r * width + c;
      cells[c] = ascii
        ? text.slice(starts[k], starts[k] + lengths[k])
        : bytes.toString('utf8', starts[k], starts[k] + lengths[k]);
    }
    out[r] = cells;
  }
  return out;
}

/** The rows of a block made by utf8RowBlock(). */
export function blockRowCount(block: Uint8Array): number {
  return blockHead(block).rows;
}

function blockHead(block: Uint8Array): { rows: number; width: number } {
  const view = new DataView(block.buffer, block.byteOffset, BLOCK_HEAD * 4);
  return { rows: view.getUint32(0, true), width: view.getUint32(4, true) };
}

function rowsOfBlock(block: Uint8Array, width: number): Utf8Rows {
  if (block.byteOffset % 4 !== 0) block = block.slice();
  const [rows, blockWidth] = new Uint32Array(block.buffer, block.byteOffset, BLOCK_HEAD);
  if (blockWidth !== width) throw new Error(`a block of ${blockWidth} columns for ${width}`);
  const cells = rows * width;
  const lengths = new Uint32Array(block.buffer, block.byteOffset + BLOCK_HEAD * 4, cells).slice();
  const starts = new Uint32Array(cells);
  const offset = (BLOCK_HEAD + cells) * 4;
  let at = 0;
  for (let k = 0; k < cells; k++) {
    starts[k] = at;
    at += lengths[k];
  }
  if (offset + at !== block.byteLength) throw new Error('a row block whose lengths do not cover its bytes');
  const bytes = Buffer.from(block.buffer, block.byteOffset + offset, at);
  return { bytes, starts, lengths, rows };
}
