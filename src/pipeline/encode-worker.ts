/**
 * Worker thread entry of the output encoding pool (sink.ts): packed rows in, encoded text out. Loaded by
 * file URL from dist/; it must not import anything that starts work on load.
 */
import { workerData } from 'node:worker_threads';
import { rowEncoder, unpackRows, type PackedRows, type RowFormat } from './row-encoders.js';
import { serveTasks } from './worker-pool.js';

const encode = rowEncoder(workerData as RowFormat);

serveTasks<PackedRows, string>((packed) => ({ output: encode(unpackRows(packed)) }));
