/** Opens an input for a run: as pieces of CSV for the row threads, or as parsed rows. */
import type { ParquetTableSource } from '../io/parquet/parquet-source.js';
import { openSource } from '../io/source.js';
import type { OpenSourceOptions, TableSource } from '../io/table.js';
import { parquetReadThreadAvailable, ParquetThreadSource } from './parquet-read-thread.js';
import { openCsvPieces, type CsvPieceSource } from '../io/csv/piece-source.js';
import { RowThreads } from './row-threads.js';

/** An input as parsed rows, or, for the row threads to parse, as pieces of CSV. */
export type TableInput = TableSource | CsvPieceSource;

export function isPieceSource(input: TableInput): input is CsvPieceSource {
  return 'pieces' in input;
}

/**
 * Opens the input for `threads` row threads: a CSV input as pieces when there are threads to parse them (and a
 * compiled thread script to start), a Parquet input asked to (readThread) as rows decoded on a thread of its
 * own, anything else as parsed rows. Records that cannot be read are skipped
 * (`onBadRecord`) by the parsing on this thread only, so that mode reads as parsed rows too.
 */
export async function openTableInput(options: OpenSourceOptions, threads: number): Promise<TableInput> {
  const format = options.format;
  if (options.readThread === true && format === 'parquet' && parquetReadThreadAvailable())
    return new ParquetThreadSource((await openSource(options)) as ParquetTableSource, options.chunkRows);
  const pieces = threads > 0 && options.onBadRecord === undefined && format === 'csv' && RowThreads.available();
  return pieces ? openCsvPieces(options) : openSource(options);
}
