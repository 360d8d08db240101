/**
 * Worker thread entry of the output encoding pool (sink.ts): packed rows in, encoded UTF-8 bytes out. Loaded by
 * file URL from dist/; it must not import anything that starts work on load.
 */
import { workerData } from 'node:worker_threads';
import { rowEncoder, unpackRows, type PackedRows, type RowFormat } from './row-encoders.js';
import { serveTasks } from '../../workers/worker-pool.js';

const encode = rowEncoder(workerData as RowFormat);
const utf8 = new TextEncoder();

// UTF-8 bytes, handed over (transferred, not copied): the main thread writes them as they are, and the text
// itself dies here young instead of ageing in two heaps
serveTasks<PackedRows, Uint8Array>((packed) => {
  const bytes = utf8.encode(encode(unpackRows(packed)));
  return { output: bytes, transfer: [bytes.buffer as ArrayBuffer] };
});
