/** Opens an input table by its settled format: CSV or JSONL (either may be gzipped) read here, Parquet by its reader. */
import { BadRecords } from './bad-records.js';
import { ByteInput } from './byte-input.js';
import { CsvTable } from './csv/csv-table.js';
import { JsonlTable } from './jsonl/jsonl-table.js';
import type { OpenSourceOptions, TableSource } from './table.js';

/** Opens a CSV, JSONL (either may be gzipped) or Parquet table. Resolves once the header is known. */
export async function openSource(opts: OpenSourceOptions): Promise<TableSource> {
  // the Parquet reader is loaded only for a Parquet input: a CSV run (and every row thread) goes without it
  if (opts.format === 'parquet') return (await import('./parquet/parquet-source.js')).openParquetSource(opts);
  const input = await ByteInput.open(opts);
  const bad = opts.onBadRecord !== undefined ? new BadRecords(input.name, opts.onBadRecord) : undefined;
  input.skipBadBytes = bad !== undefined;
  const table =
    opts.format === 'jsonl'
      ? new JsonlTable(input, opts.chunkRows, opts.encoding, bad)
      : new CsvTable(input, opts.chunkRows, opts, bad);
  try {
    await table.open();
  } catch (err) {
    input.close();
    throw err;
  }
  return table;
}
