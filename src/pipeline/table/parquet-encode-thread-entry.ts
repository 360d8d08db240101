/**
 * Worker thread entry of the Parquet output (parquet-sink.ts): packed rows in, the bytes of the row groups they
 * complete out. One thread holds one file's encoder, so the byte offsets its footer records are the file's own.
 * Loaded by file URL from dist/; it must not import anything that starts work on load.
 */
import { workerData } from 'node:worker_threads';
import { ParquetEncoder, type ParquetLayout } from './parquet-encoder.js';
import type { PackedRows } from './row-encoders.js';
import { serveTasks } from '../workers/worker-pool.js';

/** A task: rows to add (packed, or a block made by utf8RowBlock()), or (without either) the end of the file. */
export interface ParquetEncodeTask {
  rows?: PackedRows;
  block?: Uint8Array;
}

const encoder = new ParquetEncoder(workerData as ParquetLayout);

// the bytes are handed over (transferred, not copied): the main thread writes them as they are
serveTasks<ParquetEncodeTask, Uint8Array>((task) => {
  const bytes =
    task.rows !== undefined
      ? encoder.addPacked(task.rows)
      : task.block !== undefined
        ? encoder.addBlock(task.block)
        : encoder.finish();
  return { output: bytes, transfer: [bytes.buffer as ArrayBuffer] };
});
