/** Reads a Parquet file as a table of text cells, one row group at a time. */
import { stat } from 'node:fs/promises';
import {
  asyncBufferFromFile,
  parquetMetadataAsync,
  parquetRead,
  parquetSchema,
  type AsyncBuffer,
  type FileMetaData,
  type SchemaTree,
} from 'hyparquet';
import { compressors } from 'hyparquet-compressors';
import { pageLocationsOf, type PageLocation } from './parquet-pages.js';
import {
  openFailure,
  InputError,
  type InputRow,
  type OpenSourceOptions,
  type SourceProblemCounts,
  type TableSource,
} from './table.js';
import type { ParquetColumn } from './parquet-columns.js';

const DEFAULT_CHUNK_ROWS = 2000;
/**
 * Rows decoded at once: only the pages of those rows are read (found by the file's offset index, or, without
 * one, by reading the pages' headers), so a big row group is never decoded, and held, all at once.
 */
const SLICE_ROWS = 10_000;

export type { ParquetColumn, ParquetColumnKind } from './parquet-columns.js';
export { requireTextColumns } from './parquet-columns.js';

/** A Parquet input: a table source that also says what type each column has. */
export interface ParquetTableSource extends TableSource {
  columns: readonly ParquetColumn[];
}

/**
 * Opens a Parquet file. Only the footer is read here; rows come one row group at a time, so memory is bounded
 * by the largest row group, not by the file. Every cell becomes text: strings exactly as stored, other
 * scalars in their plain text form, null as ''. A Parquet file cannot be read from a pipe (its index is at
 * the end of the file).
 */
export async function openParquetSource(opts: OpenSourceOptions): Promise<ParquetTableSource> {
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
  return new ParquetTable(name, file, metadata, columns, Math.max(1, opts.chunkRows ?? DEFAULT_CHUNK_ROWS));
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

class ParquetTable implements ParquetTableSource {
  readonly header: string[];
  readonly notes: string[] = [];
  readonly totalBytes: number;
  private consumed = 0;
  private iterated = false;
  /** Columns that are not nested: their pages count rows. */
  private readonly flatColumns: ReadonlySet<string>;

  constructor(
    readonly name: string,
    private readonly file: AsyncBuffer,
    private readonly metadata: FileMetaData,
    readonly columns: readonly ParquetColumn[],
    private readonly chunkRows: number,
  ) {
    this.header = columns.map((c) => c.name);
    this.totalBytes = file.byteLength;
    this.flatColumns = new Set(columns.filter((c) => c.kind !== 'nested').map((c) => c.name));
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

  private async *chunks(): AsyncGenerator<InputRow[]> {
    let rowStart = 0;
    const groups = this.metadata.row_groups;
    for (let g = 0; g < groups.length; g++) {
      const count = Number(groups[g].num_rows);
      const rowEnd = rowStart + count;
      const pages = count > SLICE_ROWS ? await this.pagesOf(g, rowStart, rowEnd) : undefined;
      const slice = pages === undefined ? count : pages.sliceRows;
      for (let from = rowStart; from < rowEnd; from += slice) {
        const rows = await this.readRows(from, Math.min(rowEnd, from + slice), pages);
        for (let i = 0; i < rows.length; i += this.chunkRows) yield rows.slice(i, i + this.chunkRows);
      }
      this.consumed += Number(groups[g].total_compressed_size ?? 0n);
      rowStart = rowEnd;
    }
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

  /** Rows rowStart to rowEnd of one row group; the row's number in the file (from 1) stands where a text file has its line. */
  private async readRows(rowStart: number, rowEnd: number, pages: GroupPages | undefined): Promise<InputRow[]> {
    let data: unknown[][] = [];
    // hyparquet reads only the pages of the rows asked for when it is given their locations (pageLocationsByGroup)
    const options: Parameters<typeof parquetRead>[0] & { pageLocationsByGroup?: Record<string, PageLocation[]>[] } = {
      file: this.file,
      metadata: this.metadata,
      rowStart,
      rowEnd,
      useOffsetIndex: pages !== undefined && pages.byGroup === undefined,
      compressors,
      onComplete: (rows: unknown[][]) => {
        data = rows;
      },
      ...(pages?.byGroup !== undefined ? { pageLocationsByGroup: pages.byGroup } : {}),
    };
    try {
      await parquetRead(options);
    } catch (err) {
      throw this.unreadable(rowStart, rowEnd, err);
    }
    const width = this.header.length;
    const out: InputRow[] = new Array(data.length);
    for (let r = 0; r < data.length; r++) {
      const values = data[r];
      const cells = new Array<string>(width);
      for (let c = 0; c < width; c++) cells[c] = cellText(values[c]);
      out[r] = { line: rowStart + r + 1, cells };
    }
    return out;
  }

  private unreadable(rowStart: number, rowEnd: number, err: unknown): InputError {
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

/** How a row group is read in slices: rows per slice, and its pages' locations when the file has no offset index. */
interface GroupPages {
  sliceRows: number;
  byGroup?: Record<string, PageLocation[]>[];
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
