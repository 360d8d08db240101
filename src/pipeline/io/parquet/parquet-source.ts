/** Reads a Parquet file as a table of text cells, one row group at a time. */
import { stat } from 'node:fs/promises';
import {
  asyncBufferFromFile,
  parquetMetadataAsync,
  parquetRead,
  parquetSchema,
  type AsyncBuffer,
  type FileMetaData,
  type ParquetParsers,
  type SchemaTree,
} from 'hyparquet';
import { compressors } from 'hyparquet-compressors';
import type { ArrowGroups } from './parquet-arrow-groups.js';
import { pageLocationsOf, type PageLocation } from './parquet-pages.js';
import { cellString, columnCells, type TextCell, type Utf8Chunk, utf8Column } from '../utf8-columns.js';
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

const DEFAULT_CHUNK_ROWS = 2000;
/** A string column's values as hyparquet finds them: UTF-8 bytes (a view of the page), not decoded. */
const STORED_TEXT = { stringFromBytes: (bytes: Uint8Array | undefined) => bytes } as unknown as Partial<ParquetParsers>;
/**
 * Rows decoded at once: only the pages of those rows are read (found by the file's offset index, or, without
 * one, by reading the pages' headers), so a big row group is never decoded, and held, all at once.
 */
const SLICE_ROWS = 10_000;
/**
 * A row group up to this size uncompressed is read whole: reading in slices costs hyparquet more per row, and
 * the slices are needed to bound memory only where the group is big.
 */
const WHOLE_GROUP_BYTES = 16 * 1024 * 1024;
/**
 * A row group up to this size uncompressed, in a file whose columns are all text, is decoded by the compiled
 * decoder (parquet-arrow-groups.ts), which costs far less than hyparquet per row; a bigger one is read in slices
 * by hyparquet, as the compiled decoder holds a whole group in memory it never gives back.
 */
export const ARROW_GROUP_BYTES = 16 * 1024 * 1024;

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

/**
 * Opens a Parquet file. Only the footer is read here; rows come one row group at a time, so memory is bounded
 * by the largest row group, not by the file. Every cell becomes text: strings exactly as stored, other
 * scalars in their plain text form, null as ''. A Parquet file cannot be read from a pipe (its index is at
 * the end of the file).
 */
/** How a Parquet file is read beyond the options of every source. */
export interface ParquetReading {
  /** A row group up to this size uncompressed is read whole (default WHOLE_GROUP_BYTES; 0: always in slices). */
  wholeGroupBytes?: number;
  /**
   * A row group up to this size uncompressed is decoded by parquet-wasm when every column is text (say
   * ARROW_GROUP_BYTES). Default 0, never: a panic of that decoder is caught by a process-wide listener
   * (parquet-arrow-groups.ts), which only the reading thread, whose process is its own, sets up.
   */
  arrowGroupBytes?: number;
}

export async function openParquetSource(
  opts: OpenSourceOptions,
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
    Math.max(1, opts.chunkRows ?? DEFAULT_CHUNK_ROWS),
    reading.wholeGroupBytes ?? WHOLE_GROUP_BYTES,
    reading.arrowGroupBytes ?? 0,
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
  /** Columns that are not nested: their pages count rows. */
  private readonly flatColumns: ReadonlySet<string>;
  /** The compiled decoder of this file, once opened; undefined when it is not used (or stopped being used). */
  private arrow: Promise<ArrowGroups | undefined> | undefined;
  /** The metadata as hyparquet is given it for one column of one row group. */
  private readonly views: ColumnViews;

  constructor(
    readonly name: string,
    private readonly file: AsyncBuffer,
    private readonly metadata: FileMetaData,
    readonly columns: readonly ParquetColumn[],
    private readonly chunkRows: number,
    private readonly wholeGroupBytes: number,
    private readonly arrowGroupBytes: number,
    /** The run's interrupt: a slice of a wide file is many reads, and they stop at the next column. */
    private readonly signal: AbortSignal | undefined,
  ) {
    this.header = columns.map((c) => c.name);
    this.totalBytes = file.byteLength;
    this.flatColumns = new Set(columns.filter((c) => c.kind !== 'nested').map((c) => c.name));
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
    for await (const part of this.parts()) {
      if (!('rowStart' in part)) {
        for await (const chunk of part) {
          const cells = chunk.columns.map(columnCells);
          const rows: InputRow[] = new Array(chunk.rows);
          for (let r = 0; r < chunk.rows; r++) {
            const row = new Array<string>(width);
            for (let c = 0; c < width; c++) row[c] = cells[c][r];
            rows[r] = { line: chunk.firstLine + r, cells: row };
          }
          yield rows;
        }
        continue;
      }
      const slice = part;
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
    for await (const part of this.parts()) {
      if ('rowStart' in part) yield* this.utf8Slice(part);
      else yield* part;
    }
  }

  /** A slice read by hyparquet as chunks of UTF-8 columns. */
  private async *utf8Slice(slice: Slice): AsyncGenerator<Utf8Chunk> {
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

  /**
   * The parts the file is read in, in order: a row group that the compiled decoder reads, as its chunks; or the
   * slices hyparquet reads, each a row group or part of a big one whose pages can be found.
   */
  private async *parts(): AsyncGenerator<Slice | AsyncIterable<Utf8Chunk>> {
    let rowStart = 0;
    const groups = this.metadata.row_groups;
    try {
      for (let g = 0; g < groups.length; g++) {
        const count = Number(groups[g].num_rows);
        const rowEnd = rowStart + count;
        const size = Number(groups[g].total_byte_size);
        // a group that claims no rows is skipped (its column chunks may be another group's)
        const arrow = count > 0 && size <= this.arrowGroupBytes ? await this.arrowGroups() : undefined;
        if (arrow !== undefined) yield this.arrowGroup(arrow, g, rowStart, rowEnd);
        else yield* this.slicesOf(g, rowStart, rowEnd);
        this.consumed += Number(groups[g].total_compressed_size ?? 0n);
        rowStart = rowEnd;
      }
    } finally {
      const arrow = await this.arrow;
      this.arrow = Promise.resolve(undefined);
      arrow?.close();
    }
  }

  /** The slices hyparquet reads group `g` in. */
  private async *slicesOf(g: number, rowStart: number, rowEnd: number): AsyncGenerator<Slice> {
    const count = rowEnd - rowStart;
    const small = Number(this.metadata.row_groups[g].total_byte_size) <= this.wholeGroupBytes;
    const pages = count > SLICE_ROWS && !small ? await this.pagesOf(g, rowStart, rowEnd) : undefined;
    const slice = pages === undefined ? count : pages.sliceRows;
    for (let from = rowStart; from < rowEnd; from += slice)
      yield { group: g, groupStart: rowStart, rowStart: from, rowEnd: Math.min(rowEnd, from + slice), pages };
  }

  /** The compiled decoder of this file, opened at the first group it is to read; undefined if it cannot be used. */
  private arrowGroups(): Promise<ArrowGroups | undefined> {
    // loaded here, not with this module: it brings apache-arrow, whose code and heap a run that never decodes
    // this way should not carry
    this.arrow ??= import('./parquet-arrow-groups.js')
      .then(({ ArrowGroups }) => ArrowGroups.open(this.name, this.header))
      .catch(() => undefined);
    return this.arrow;
  }

  /**
   * Group `g` decoded by the compiled decoder. The group's chunks are all decoded before the first is given (the
   * group is small), so that if the decoder fails on it (corrupt data, a string that is not UTF-8, which it
   * refuses), the group, and the rest of the file, is read by hyparquet instead, as if the decoder had not been
   * tried: the same cells, or the same error.
   */
  private async *arrowGroup(
    arrow: ArrowGroups,
    g: number,
    rowStart: number,
    rowEnd: number,
  ): AsyncGenerator<Utf8Chunk> {
    const chunks: Utf8Chunk[] = [];
    try {
      for await (const chunk of arrow.group(g, rowStart + 1, rowEnd - rowStart, this.chunkRows)) chunks.push(chunk);
    } catch {
      this.arrow = Promise.resolve(undefined);
      arrow.close();
      for await (const slice of this.slicesOf(g, rowStart, rowEnd)) yield* this.utf8Slice(slice);
      return;
    }
    yield* chunks;
  }

  /**
   * How the pages of group `g` are found: by the offset index when every column chunk has one, else by their
   * headers. Undefined when the group is better read whole: its pages cannot be told (columns nested in lists
   * or maps), or a page holds about the whole group (a page is decoded whole, for every slice it is part of).
   */
  private async pagesOf(g: number, rowStart: number, rowEnd: number): Promise<GroupPages | undefined> {
    if (this.metadata.row_groups[g].columns.every((c) => c.offset_index_offset !== undefined))
      return { sliceRows: SLICE_ROWS };
    let located: Record<string, PageLocation[]> | undefined;
    try {
      located = await pageLocationsOf(this.file, this.metadata, g, this.flatColumns);
    } catch (err) {
      throw this.unreadable(rowStart, rowEnd, err);
    }
    if (located === undefined) return undefined;
    // slices at least as long as the longest page: each page is then decoded at most twice
    let longest = 0;
    for (const pages of Object.values(located)) {
      for (let i = 0; i < pages.length; i++) {
        const end = i + 1 < pages.length ? Number(pages[i + 1].first_row_index) : rowEnd - rowStart;
        longest = Math.max(longest, end - Number(pages[i].first_row_index));
      }
    }
    const sliceRows = Math.max(SLICE_ROWS, longest);
    if (sliceRows * 2 > rowEnd - rowStart) return undefined;
    const byGroup: Record<string, PageLocation[]>[] = [];
    byGroup[g] = located;
    return { sliceRows, byGroup };
  }

  /**
   * The cells of one slice, one column at a time, each column handed to `take` (a cell of a string column as its
   * UTF-8 bytes, as stored, see TextCell; any other cell as text). Only that column's pages are read and decoded.
   */
  private async readColumns(slice: Slice, take: (column: number, cells: TextCell[]) => void): Promise<void> {
    const { rowStart, rowEnd, pages, group, groupStart } = slice;
    const located = pages?.byGroup?.[group];
    for (let c = 0; c < this.columns.length; c++) {
      if (this.signal?.aborted === true) throw readInterrupted();
      const cells = new Array<TextCell>(rowEnd - rowStart);
      let filled = 0;
      // hyparquet is given the file as this column of this row group alone (rows counted from the group's first):
      // it works over every column and group of the metadata it is given, once per call
      const options: Parameters<typeof parquetRead>[0] & { pageLocationsByGroup?: Record<string, PageLocation[]>[] } = {
        file: this.file,
        metadata: this.views.of(c, group),
        rowStart: rowStart - groupStart,
        rowEnd: rowEnd - groupStart,
        columns: [this.header[c]],
        useOffsetIndex: pages !== undefined && pages.byGroup === undefined,
        compressors,
        // hyparquet reads only the pages of the rows asked for when it is given their locations
        ...(located !== undefined ? { pageLocationsByGroup: [located] } : {}),
      };
      if (this.columns[c].kind === 'nested') {
        // a nested value is assembled from several leaf columns: hyparquet puts it together as rows
        options.onComplete = (rows: unknown[][]) => {
          for (let r = 0; r < rows.length && r < cells.length; r++) cells[r] = cellText(rows[r][0]);
          filled = Math.min(rows.length, cells.length);
        };
      } else {
        // text as the stored bytes: most cells are then copied, never made into strings
        const text = this.columns[c].kind === 'string';
        if (text) options.parsers = STORED_TEXT;
        // a flat column comes as its pages' values, which may start before the slice and end after it
        options.onChunk = ({ columnData, rowStart: firstInGroup }) => {
          const first = groupStart + firstInGroup;
          const from = Math.max(rowStart, first);
          const to = Math.min(rowEnd, first + columnData.length);
          for (let row = from; row < to; row++) {
            const value = columnData[row - first];
            cells[row - rowStart] = text && value instanceof Uint8Array ? value : cellText(value);
          }
          if (to > from) filled += to - from;
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

/** Rows rowStart to rowEnd of one row group, read together, and how their pages are found when only part of it. */
interface Slice {
  /** The row group, and the row its first row is. */
  group: number;
  groupStart: number;
  rowStart: number;
  rowEnd: number;
  pages: GroupPages | undefined;
}

/** How a row group is read in slices: rows per slice, and its pages' locations when the file has no offset index. */
interface GroupPages {
  sliceRows: number;
  byGroup?: Record<string, PageLocation[]>[];
}

/**
 * The file's metadata cut down to one top-level column (its schema subtree) and one row group (that column's
 * chunks). hyparquet walks the whole schema and every column chunk of every group it is given on each read;
 * reading a file column by column with the whole metadata each time costs the square of the column count
 * (a 20,000-column file did not finish in minutes). A view costs the column's own size, so a slice is read in
 * time linear in its columns.
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
