/** Finds where the pages of a row group's column chunks start, for files written without an offset index. */
import type { AsyncBuffer, FileMetaData } from 'hyparquet';
import { parquetHeader } from 'hyparquet/src/column.js';

/** A data page: where its header starts, its size with the header, and the group's row it starts at. */
export interface PageLocation {
  offset: bigint;
  compressed_page_size: number;
  first_row_index: bigint;
}

/** Bytes read at a page's start for its header; a header that does not fit is read again with more. */
const HEADER_WINDOW = 16 * 1024;

/**
 * The data pages of every column chunk of row group `group`, keyed by the column's path, by reading each page's
 * header only (a few KB per page, never the page itself). Undefined when they cannot be told from the headers
 * alone: a column nested in lists or maps (its pages count values, not rows), or a header that does not parse.
 */
export async function pageLocationsOf(
  file: AsyncBuffer,
  metadata: FileMetaData,
  group: number,
  flatColumns: ReadonlySet<string>,
): Promise<Record<string, PageLocation[]> | undefined> {
  const rowGroup = metadata.row_groups[group];
  const rows = Number(rowGroup.num_rows);
  const byColumn: Record<string, PageLocation[]> = {};
  for (const chunk of rowGroup.columns) {
    const meta = chunk.meta_data;
    if (meta === undefined) return undefined;
    const path = meta.path_in_schema.join('.');
    if (!flatColumns.has(path)) return undefined;
    const start = Number(meta.dictionary_page_offset ?? meta.data_page_offset);
    const end = start + Number(meta.total_compressed_size);
    const pages: PageLocation[] = [];
    let row = 0;
    let at = start;
    while (at < end && row < rows) {
      const header = await headerAt(file, at, end);
      if (header === undefined) return undefined;
      const size = header.headerBytes + header.compressed_page_size;
      const pageRows = header.data_page_header_v2?.num_rows ?? header.data_page_header?.num_values;
      if (header.type === 'DATA_PAGE' || header.type === 'DATA_PAGE_V2') {
        if (pageRows === undefined) return undefined;
        pages.push({ offset: BigInt(at), compressed_page_size: size, first_row_index: BigInt(row) });
        row += pageRows;
      }
      at += size;
    }
    if (row !== rows || pages.length === 0) return undefined;
    byColumn[path] = pages;
  }
  return byColumn;
}

async function headerAt(
  file: AsyncBuffer,
  at: number,
  end: number,
): Promise<(ReturnType<typeof parquetHeader> & { headerBytes: number }) | undefined> {
  for (let window = HEADER_WINDOW; ; window *= 4) {
    const until = Math.min(end, at + window);
    const bytes = await file.slice(at, until);
    try {
      const reader = { view: new DataView(bytes), offset: 0 };
      const header = parquetHeader(reader);
      return { ...header, headerBytes: reader.offset };
    } catch {
      // cut short by the window: read more, unless the chunk ends there
      if (until >= end) return undefined;
    }
  }
}
