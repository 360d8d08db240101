/** Reads a Parquet file as a table of text cells, one row group at a time. */
import { stat } from 'node:fs/promises';
import { brotliDecompressSync, unzipSync } from 'node:zlib';
import { decompress as zstdDecompress } from 'fzstd';
import {
  asyncBufferFromFile,
  cachedAsyncBuffer,
  parquetMetadataAsync,
  parquetRead,
  parquetSchema,
  type AsyncBuffer,
  type Compressors,
  type FileMetaData,
  type ParquetParsers,
  type SchemaTree,
} from 'hyparquet';
import { cellString, type TextCell, type Utf8Chunk, utf8Column } from '../utf8-columns.js';
import {
  openFailure,
  InputError,
  readInterrupted,
  type InputRow,
  type OpenSourceOptions,
  type SourceProblemCounts,
  type TableSource,
} from '../table.js';
import type { ParquetColumn } from './parquet-columns.js';

/** A string column's values as hyparquet finds them: UTF-8 bytes (a view of the page), not decoded. */
const STORED_TEXT = { stringFromBytes: (bytes: Uint8Array | undefined) => bytes } as unknown as Partial<ParquetParsers>;
/**
 * Rows decoded at once in a big row group, so that it is never decoded, and held, all at once. A page that runs
 * past a slice is decoded once: the rest of it is kept for the next slice.
 */
const SLICE_ROWS = 10_000;
/**
 * A row group up to this size uncompressed is read whole: reading in slices costs hyparquet more per row, and
 * the slices are needed to bound memory only where the group is big.
 */
const WHOLE_GROUP_BYTES = 16 * 1024 * 1024;
/**
 * The codecs warehouses write, besides SNAPPY and none, which hyparquet reads itself. GZIP pages are read by
 * zlib whichever header they carry; ZSTD by fzstd, as Node 20's zlib has no ZSTD.
 */
const COMPRESSORS: Compressors = {
  GZIP: (input) => unzipSync(input),
  BROTLI: (input) => brotliDecompressSync(input),
  ZSTD: (input) => zstdDecompress(input),
};

export type { ParquetColumn, ParquetColumnKind } from './parquet-columns.js';
export { requireTextColumns } from './parquet-columns.js';
export type { Utf8Chunk } from '../utf8-columns.js';

/** A Parquet input: a table source that also says what type each column has. */
export interface ParquetTableSource extends TableSource {
  columns: readonly ParquetColumn[];
}

/** A Parquet file read here: its rows can also be had as chunks of UTF-8 columns, instead of rows(). */
export interface ParquetFileSource extends ParquetTableSource {
  utf8Chunks(): AsyncIterable<Utf8Chunk>;
}

/** How a Parquet file is read beyond the options of every source. */
export interface ParquetReading {
  /** A row group up to this size uncompressed is read whole (default WHOLE_GROUP_BYTES; 0: always in slices). */
  wholeGroupBytes?: number;
}

/**
 * Opens a Parquet file. Only the footer is read here; rows come a row group, or a slice of a big one, at a time,
 * so memory is bounded by the row group, not by the file. Every cell becomes text: strings exactly as stored,
 * other scalars in their plain text form, null as ''. A Parquet file cannot be read from a pipe (its index is at
 * the end of the file).
 */
export async function openParquetSource(
  opts: Pick<OpenSourceOptions, 'path' | 'stream' | 'chunkRows' | 'signal'>,
  reading: ParquetReading = {},
): Promise<ParquetFileSource> {
  if (opts.path === '-' || opts.stream !== undefined) {
    throw new InputError(
      '<stdin>',
      undefined,
      'Parquet cannot be read from stdin (its index is at the end of the file)',
      'give the file name instead of -',
    );
  }
  const name = opts.path;
  let file: AsyncBuffer;
  try {
    const st = await stat(name);
    if (st.isDirectory()) throw new InputError(name, undefined, 'a directory, not a file');
    if (!st.isFile()) {
      throw new InputError(
        name,
        undefined,
        'a pipe or device, not a file: Parquet cannot be read from a pipe (its index is at the end of the file)',
        'write it to a file first',
      );
    }
    file = await asyncBufferFromFile(name);
  } catch (err) {
    throw openFailure(name, err);
  }
  let metadata: FileMetaData;
  try {
    metadata = await parquetMetadataAsync(file);
  } catch {
    throw new InputError(
      name,
      undefined,
      'not a readable Parquet file (its footer is missing or corrupt: a truncated copy?)',
      'copy or export it again',
    );
  }
  const columns = topLevelColumns(name, metadata);
  return new ParquetTable(
    name,
    file,
    metadata,
    columns,
    opts.chunkRows,
    reading.wholeGroupBytes ?? WHOLE_GROUP_BYTES,
    opts.signal,
  );
}

function topLevelColumns(name: string, metadata: FileMetaData): ParquetColumn[] {
  let tree: SchemaTree;
  try {
    tree = parquetSchema(metadata);
  } catch {
    throw new InputError(
      name,
      undefined,
      'not a readable Parquet file (its schema is corrupt)',
      'copy or export it again',
    );
  }
  for (const child of tree.children) {
    const unsupported = undecodableType(child);
    if (unsupported !== undefined) {
      throw new InputError(
        name,
        undefined,
        `unsupported type ${unsupported} in column '${child.element.name}'`,
        'this reader cannot decode it: export the file without that column, or with it cast to text (in SQL: CAST(column AS VARCHAR))',
      );
    }
  }
  return tree.children.map((child) => {
    const e = child.element;
    const logical = e.logical_type?.type;
    const declared = [e.type, logical ?? e.converted_type].filter((x) => x !== undefined).join(' ') || 'group';
    if (child.children.length > 0 || e.repetition_type === 'REPEATED')
      return { name: e.name, kind: 'nested', declared: logical ?? e.converted_type ?? 'group' };
    const text =
      e.type === 'BYTE_ARRAY' &&
      (logical === undefined || logical === 'STRING' || logical === 'ENUM' || logical === 'JSON' || logical === 'UUID');
    const textConverted =
      e.type === 'BYTE_ARRAY' &&
      (e.converted_type === undefined ||
        e.converted_type === 'UTF8' ||
        e.converted_type === 'ENUM' ||
        e.converted_type === 'JSON');
    return { name: e.name, kind: text && textConverted ? 'string' : 'scalar', declared };
  });
}

/** Types hyparquet refuses to decode, though a file holding them is valid. */
const UNDECODABLE_TYPES: ReadonlySet<string> = new Set(['INTERVAL', 'BSON']);

/**
 * The type in a column (itself, or a field nested in it) that cannot be decoded, if any: found when the footer is
 * read, so that the file is refused for what it is, before any row, rather than as a corrupt row group.
 */
function undecodableType(column: SchemaTree): string | undefined {
  const pending: SchemaTree[] = [column];
  for (let node = pending.pop(); node !== undefined; node = pending.pop()) {
    const e = node.element;
    for (const type of [e.converted_type, e.logical_type?.type])
      if (type !== undefined && UNDECODABLE_TYPES.has(type)) return type;
    for (const child of node.children) pending.push(child);
  }
  return undefined;
}

class ParquetTable implements ParquetFileSource {
  readonly header: string[];
  readonly notes: string[] = [];
  readonly totalBytes: number;
  private consumed = 0;
  private iterated = false;
  /** Whether a column is nested: its pages count values, not rows, and it is read as rows. */
  private readonly nested: boolean;
  /** Per column of the row group being read: the cells decoded past the last slice (the rest of a page). */
  private carried: (Carried | undefined)[] = [];
  /** The metadata as hyparquet is given it for one column of one row group. */
  private readonly views: ColumnViews;

  constructor(
    readonly name: string,
    private readonly file: AsyncBuffer,
    private readonly metadata: FileMetaData,
    readonly columns: readonly ParquetColumn[],
    private readonly chunkRows: number,
    private readonly wholeGroupBytes: number,
    /** The run's interrupt: a slice of a wide file is many reads, and they stop at the next column. */
    private readonly signal: AbortSignal | undefined,
  ) {
    this.header = columns.map((c) => c.name);
    this.totalBytes = file.byteLength;
    this.nested = columns.some((c) => c.kind === 'nested');
    this.views = new ColumnViews(metadata);
  }

  bytesRead(): number {
    return this.consumed;
  }

  problems(): SourceProblemCounts {
    return { shortRows: 0, longRows: 0, extraKeys: 0 };
  }

  rows(): AsyncIterable<InputRow[]> {
    if (this.iterated) throw new Error(`${this.name}: rows() can be iterated only once`);
    this.iterated = true;
    return this.chunks();
  }

  /**
   * The rows as chunks of their cells' UTF-8 bytes, column after column: each slice of the file is decoded one
   * column at a time, and a column's text goes into its chunks' bytes before the next column is decoded, so the
   * strings of only one column of one slice exist at a time, and what waits to be used lives outside the heap.
   */
  utf8Chunks(): AsyncIterable<Utf8Chunk> {
    if (this.iterated) throw new Error(`${this.name}: rows() can be iterated only once`);
    this.iterated = true;
    return this.utf8Slices();
  }

  private async *chunks(): AsyncGenerator<InputRow[]> {
    const width = this.header.length;
    for await (const slice of this.slices()) {
      const columns: string[][] = new Array(width);
      // decoded as each column comes: a string is smaller than a view of the stored bytes
      await this.readColumns(slice, (c, cells) => {
        const strings = new Array<string>(cells.length);
        for (let r = 0; r < cells.length; r++) strings[r] = cellString(cells[r]);
        columns[c] = strings;
      });
      for (let i = 0; i < slice.rowEnd - slice.rowStart; i += this.chunkRows) {
        const end = Math.min(slice.rowEnd - slice.rowStart, i + this.chunkRows);
        const rows: InputRow[] = new Array(end - i);
        for (let r = i; r < end; r++) {
          const cells = new Array<string>(width);
          for (let c = 0; c < width; c++) cells[c] = columns[c][r];
          rows[r - i] = { line: slice.rowStart + r + 1, cells };
        }
        yield rows;
      }
    }
  }

  private async *utf8Slices(): AsyncGenerator<Utf8Chunk> {
    for await (const slice of this.slices()) {
      const count = slice.rowEnd - slice.rowStart;
      const chunks: Utf8Chunk[] = [];
      for (let i = 0; i < count; i += this.chunkRows)
        chunks.push({ firstLine: slice.rowStart + i + 1, rows: Math.min(this.chunkRows, count - i), columns: [] });
      await this.readColumns(slice, (c, cells) => {
        for (let k = 0; k < chunks.length; k++) {
          const from = k * this.chunkRows;
          chunks[k].columns[c] = utf8Column(cells, from, from + chunks[k].rows);
        }
      });
      yield* chunks;
    }
  }

  /** The slices the file is read in, in order: each a row group, or part of a big one. */
  private *slices(): Generator<Slice> {
    let rowStart = 0;
    const groups = this.metadata.row_groups;
    for (let g = 0; g < groups.length; g++) {
      const group = groups[g];
      const count = Number(group.num_rows);
      const rowEnd = rowStart + count;
      const indexed = group.columns.every((c) => c.offset_index_offset !== undefined);
      // a nested column's pages cannot be found by row without the offset index: its group is read whole
      const whole =
        count <= SLICE_ROWS || Number(group.total_byte_size) <= this.wholeGroupBytes || (this.nested && !indexed);
      // without the offset index hyparquet reads a column's whole chunk for any of its rows: each chunk is read
      // from disk once and kept while its group is read
      const file = whole || indexed ? this.file : cachedAsyncBuffer(this.file, { minSize: 0 });
      const sliceRows = whole ? count : SLICE_ROWS;
      this.carried = [];
      // a group that claims no rows is skipped (its column chunks may be another group's)
      for (let from = rowStart; from < rowEnd; from += sliceRows)
        yield {
          group: g,
          groupStart: rowStart,
          rowStart: from,
          rowEnd: Math.min(rowEnd, from + sliceRows),
          file,
          useOffsetIndex: indexed && !whole,
        };
      this.consumed += Number(group.total_compressed_size ?? 0n);
      rowStart = rowEnd;
    }
  }

  /**
   * The cells of one slice, one column at a time, each column handed to `take` (a cell of a string column as its
   * UTF-8 bytes, as stored, see TextCell; any other cell as text). Only that column's pages are decoded, each
   * once: the rows of a page past the slice's end are kept for the next slice.
   */
  private async readColumns(slice: Slice, take: (column: number, cells: TextCell[]) => void): Promise<void> {
    const { rowStart, rowEnd, group, groupStart } = slice;
    for (let c = 0; c < this.columns.length; c++) {
      if (this.signal?.aborted === true) throw readInterrupted();
      const cells = new Array<TextCell>(rowEnd - rowStart);
      let filled = 0;
      const text = this.columns[c].kind === 'string';
      // text as the stored bytes: most cells are then copied, never made into strings
      const cellOf = (value: unknown): TextCell => (text && value instanceof Uint8Array ? value : cellText(value));
      // the rows the last slice decoded past its end come first; the page is kept while it has rows to give
      let next = rowStart;
      const kept = this.carried[c];
      this.carried[c] = undefined;
      if (kept !== undefined && kept.first <= rowStart && rowStart < kept.first + kept.values.length) {
        const end = kept.first + kept.values.length;
        next = Math.min(rowEnd, end);
        for (let row = rowStart; row < next; row++) cells[row - rowStart] = cellOf(kept.values[row - kept.first]);
        filled = next - rowStart;
        if (end > rowEnd) this.carried[c] = kept;
      }
      if (next === rowEnd) {
        take(c, cells);
        continue;
      }
      // hyparquet is given the file as this column of this row group alone (rows counted from the group's first):
      // it works over every column and group of the metadata it is given, once per call
      const options: Parameters<typeof parquetRead>[0] = {
        file: slice.file,
        metadata: this.views.of(c, group),
        rowStart: next - groupStart,
        rowEnd: rowEnd - groupStart,
        columns: [this.header[c]],
        useOffsetIndex: slice.useOffsetIndex,
        compressors: COMPRESSORS,
      };
      if (this.columns[c].kind === 'nested') {
        // a nested value is assembled from several leaf columns: hyparquet puts it together as rows
        options.onComplete = (rows: unknown[][]) => {
          for (let r = 0; r < rows.length && r < cells.length; r++) cells[r] = cellText(rows[r][0]);
          filled = Math.min(rows.length, cells.length);
        };
      } else {
        if (text) options.parsers = STORED_TEXT;
        // a flat column comes as its pages' values, which may start before the slice and end after it
        options.onChunk = ({ columnData, rowStart: firstInGroup }) => {
          const first = groupStart + firstInGroup;
          const from = Math.max(next, first);
          const to = Math.min(rowEnd, first + columnData.length);
          for (let row = from; row < to; row++) cells[row - rowStart] = cellOf(columnData[row - first]);
          if (to > from) filled += to - from;
          if (first + columnData.length > rowEnd && first <= rowEnd) this.carried[c] = { first, values: columnData };
        };
      }
      try {
        await parquetRead(options);
      } catch (err) {
        throw this.unreadable(rowStart, rowEnd, err);
      }
      if (filled !== cells.length) throw this.unreadable(rowStart, rowEnd);
      take(c, cells);
    }
  }

  private unreadable(rowStart: number, rowEnd: number, err?: unknown): InputError {
    const reason =
      err instanceof Error && /compression|codec/i.test(err.message)
        ? 'is compressed with a codec this build cannot read'
        : 'cannot be decoded (corrupt data?)';
    return new InputError(
      this.name,
      undefined,
      `the row group holding rows ${rowStart + 1} to ${rowEnd} ${reason}`,
      'export it again, with SNAPPY, ZSTD or GZIP compression',
    );
  }
}

/** Rows rowStart to rowEnd of one row group, read together, and the file as hyparquet reads them from it. */
interface Slice {
  /** The row group, and the row its first row is. */
  group: number;
  groupStart: number;
  rowStart: number;
  rowEnd: number;
  file: AsyncBuffer;
  /** Whether hyparquet finds the slice's pages by the file's offset index. */
  useOffsetIndex: boolean;
}

/** The values of a page decoded for one slice that runs past it, the first being row `first`. */
interface Carried {
  first: number;
  values: ArrayLike<unknown>;
}

/**
 * The file's metadata cut down to one top-level column (its schema subtree) and one row group (that column's
 * chunks). hyparquet walks the whole schema and every column chunk of every group it is given on each read;
 * reading a file column by column with the whole metadata each time would cost the square of the column count.
 * A view costs the column's own size, so a slice is read in time linear in its columns.
 */
class ColumnViews {
  /** Each top-level column's schema: the root (with one child) and the column's subtree. */
  private readonly schemas: FileMetaData['schema'][];
  /** The row group whose chunks `chunks` holds, by top-level column name. */
  private group = -1;
  private chunks = new Map<string, FileMetaData['row_groups'][number]['columns']>();

  constructor(private readonly metadata: FileMetaData) {
    const schema = metadata.schema;
    const root = { ...schema[0], num_children: 1 };
    this.schemas = [];
    let at = 1;
    for (let c = 0; c < (schema[0]?.num_children ?? 0); c++) {
      const start = at;
      // a subtree is its element and, depth first, its children's subtrees
      let open = 1;
      while (open > 0 && at < schema.length) {
        open += (schema[at].num_children ?? 0) - 1;
        at++;
      }
      this.schemas.push([root, ...schema.slice(start, at)]);
    }
  }

  /** The metadata of column `c` (in header order) in row group `g` alone. */
  of(c: number, g: number): FileMetaData {
    const schema = this.schemas[c];
    const name = schema[1].name;
    if (this.group !== g) {
      this.chunks = new Map();
      for (const chunk of this.metadata.row_groups[g].columns) {
        const top = chunk.meta_data?.path_in_schema[0];
        if (top === undefined) continue;
        const list = this.chunks.get(top);
        if (list === undefined) this.chunks.set(top, [chunk]);
        else list.push(chunk);
      }
      this.group = g;
    }
    const group = this.metadata.row_groups[g];
    return {
      ...this.metadata,
      schema,
      num_rows: group.num_rows,
      row_groups: [{ ...group, columns: this.chunks.get(name) ?? [] }],
    };
  }
}

/** A Parquet value as a cell: strings as stored, scalars as their plain text, nested values as JSON, null as ''. */
function cellText(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean') return String(value);
  if (value instanceof Date) return value.toISOString();
  if (value instanceof Uint8Array) return Buffer.from(value).toString('base64');
  return JSON.stringify(value, (_key, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
}
