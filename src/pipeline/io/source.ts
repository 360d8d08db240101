/** Opens an input table by its format: CSV or JSONL (either may be gzipped) read here, Parquet by its reader. */
import { BadRecords } from './bad-records.js';
import { ByteInput } from './byte-input.js';
import { CsvTable } from './csv/csv-table.js';
import { JsonlTable } from './jsonl/jsonl-table.js';
import type { OpenSourceOptions, TableSource } from './table.js';

export const DEFAULT_CHUNK_ROWS = 2000;

/** Opens a CSV, JSONL (either may be gzipped) or Parquet table. Resolves once the header is known. */
export async function openSource(opts: OpenSourceOptions): Promise<TableSource> {
  const format = resolveFormat(opts);
  // the Parquet reader is loaded only for a Parquet input: a CSV run (and every row thread) goes without it
  if (format === 'parquet') return (await import('./parquet/parquet-source.js')).openParquetSource(opts);
  const input = await ByteInput.open(opts);
  const chunkRows = Math.max(1, opts.chunkRows ?? DEFAULT_CHUNK_ROWS);
  const bad = opts.onBadRecord !== undefined ? new BadRecords(input.name, opts.onBadRecord) : undefined;
  input.skipBadBytes = bad !== undefined;
  const table =
    format === 'jsonl'
      ? new JsonlTable(input, chunkRows, opts.encoding ?? 'utf8', bad)
      : new CsvTable(
          input,
          chunkRows,
          {
            delimiter: opts.delimiter ?? ',',
            header: opts.header ?? true,
            encoding: opts.encoding ?? 'utf8',
          },
          bad,
        );
  try {
    await table.open();
  } catch (err) {
    input.close();
    throw err;
  }
  return table;
}

export function resolveFormat(opts: OpenSourceOptions): 'csv' | 'jsonl' | 'parquet' {
  if (opts.format === 'csv' || opts.format === 'jsonl' || opts.format === 'parquet') return opts.format;
  if (/\.parquet$/i.test(opts.path)) return 'parquet';
  // `.csv.gz`, `.jsonl.gz`: the format is the name under the compression
  return /\.(jsonl|ndjson)(\.gz)?$/i.test(opts.path) ? 'jsonl' : 'csv';
}
