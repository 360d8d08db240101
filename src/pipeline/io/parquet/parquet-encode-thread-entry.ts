/**
 * Worker thread entry of the Parquet output (parquet-sink.ts): blocks of rows in, the bytes of the row groups they
 * complete out. One thread holds one file's encoder, so the byte offsets its footer records are the file's own.
 * Loaded by file URL from dist/; it must not import anything that starts work on load.
 */
import { workerData } from 'node:worker_threads';
import { ParquetEncoder, type ParquetLayout } from './parquet-encoder.js';
import { serveTasks } from '../../workers/worker-pool.js';

/** A task: rows to add (a block made by utf8RowBlock()), or the end of the file. */
export type ParquetEncodeTask = { block: Uint8Array } | { end: true };

const encoder = new ParquetEncoder(workerData as ParquetLayout);

// the encoder carries out its calls in order, so tasks may arrive while one is under way; the bytes are handed
// over (transferred, not copied): the main thread writes them as they are
serveTasks<ParquetEncodeTask, Uint8Array>(async (task) => {
  const bytes = 'block' in task ? await encoder.addBlock(task.block) : await encoder.finish();
  return { output: bytes, transfer: [bytes.buffer as ArrayBuffer] };
});
