/**
 * Worker thread entry of the Parquet reading thread (parquet-read-thread.ts): decodes the file's rows, prepares
 * their identifier cells when given the columns, and hands them over packed, a chunk per task, in file order.
 * Loaded by file URL from dist/; it must not import anything that starts work on load.
 */
import { workerData } from 'node:worker_threads';
import { prepareRows } from '../map/prepare-rows.js';
import { openParquetSource } from '../table/parquet-source.js';
import { packRows } from '../table/row-encoders.js';
import type { InputRow, TableSource } from '../table/table.js';
import { serveTasks, type TaskResult } from '../workers/worker-pool.js';
import type { ParquetReadAnswer, ParquetReadConfig } from './parquet-read-thread.js';

const config = workerData as ParquetReadConfig;
let opened: Promise<{ source: TableSource; chunks: AsyncIterator<InputRow[]> }> | undefined;

async function nextChunk(): Promise<TaskResult<ParquetReadAnswer>> {
  opened ??= openParquetSource({ path: config.path, chunkRows: config.chunkRows }).then((source) => ({
    source,
    chunks: source.rows()[Symbol.asyncIterator](),
  }));
  const { source, chunks } = await opened;
  const next = await chunks.next();
  if (next.done === true) return { output: { done: true, bytesRead: source.bytesRead() } };
  const rows = next.value;
  const packed = packRows(rows.map((r) => r.cells));
  const transfer = [packed.cellLengths.buffer as ArrayBuffer, packed.rowWidths.buffer as ArrayBuffer];
  const prepared = config.columns === undefined ? undefined : prepareRows(rows, config.columns);
  if (prepared !== undefined)
    transfer.push(prepared.status.buffer as ArrayBuffer, prepared.phone.buffer as ArrayBuffer);
  const firstLine = rows[0]?.line ?? 0;
  return {
    output: { done: false, firstLine, rows: packed, bytesRead: source.bytesRead(), ...(prepared ? { prepared } : {}) },
    transfer,
  };
}

// tasks are answered in the order they were given: the async generator takes its next() calls in turn
serveTasks<null, ParquetReadAnswer>(() => nextChunk());
