/** Reads a Parquet input's rows on a worker thread, so decoding does not take the main thread's time. */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { unpackRows, type PackedRows } from './row-encoders.js';
import { InputError, type InputRow } from './table.js';
import { WorkerPool, type ThrownInWorker } from '../workers/worker-pool.js';

/** What the thread is told at its start. Plain data. */
export interface ParquetReadConfig {
  path: string;
  chunkRows: number;
}

/** One chunk of rows (their lines follow each other from firstLine), or the end; bytes read so far either way. */
export type ParquetReadAnswer =
  | { done: false; firstLine: number; rows: PackedRows; bytesRead: number }
  | { done: true; bytesRead: number };

/** Chunks asked for ahead of the one being used: the thread decodes while this thread maps. */
const CHUNKS_AHEAD = 4;

/**
 * V8 heap limits of the reading thread: what it decodes dies young (it is packed and handed over), so a young
 * generation that holds a few slices' worth keeps it from being copied into the old one; the old one holds little.
 */
const READ_THREAD_LIMITS = { maxYoungGenerationSizeMb: 32, maxOldGenerationSizeMb: 256 };

/** Compiled beside this module in dist/. */
const READ_WORKER = new URL('./parquet-read-thread-entry.js', import.meta.url);
let readWorkerFound: boolean | undefined;

/** Run from the TypeScript sources (vitest) there is no compiled thread script: the rows are read here. */
export function parquetReadThreadAvailable(): boolean {
  readWorkerFound ??= existsSync(fileURLToPath(READ_WORKER));
  return readWorkerFound;
}

/**
 * The rows of a Parquet file, decoded on a worker thread and handed over packed (one string and two arrays of
 * lengths per chunk, which cost far less to pass than a string per cell). `progress` is told the bytes read.
 */
export async function* rowsOnThread(
  config: ParquetReadConfig,
  progress: (bytesRead: number) => void,
): AsyncGenerator<InputRow[]> {
  const pool = new WorkerPool<null, ParquetReadAnswer>({
    script: READ_WORKER,
    size: 1,
    workerData: config,
    purpose: 'reading Parquet',
    revive: reviveInputError,
    resourceLimits: READ_THREAD_LIMITS,
  });
  const queue: Promise<ParquetReadAnswer>[] = [];
  const ask = () => {
    const answer = pool.runOn(0, null);
    // awaited in order below; until then a failure must not count as unhandled
    answer.catch(() => undefined);
    queue.push(answer);
  };
  try {
    for (let i = 0; i < CHUNKS_AHEAD; i++) ask();
    for (;;) {
      const answer = await (queue.shift() as Promise<ParquetReadAnswer>);
      progress(answer.bytesRead);
      if (answer.done) return;
      ask();
      const cells = unpackRows(answer.rows);
      const rows: InputRow[] = new Array(cells.length);
      for (let r = 0; r < cells.length; r++) rows[r] = { line: answer.firstLine + r, cells: cells[r] };
      yield rows;
    }
  } finally {
    queue.length = 0;
    await pool.close();
  }
}

/** A file the thread cannot read is the user's input problem, reported as it would be without the thread. */
function reviveInputError(thrown: ThrownInWorker): Error | undefined {
  if (thrown.name !== 'InputError') return undefined;
  const f = thrown.fields;
  return new InputError(
    String(f.file),
    typeof f.line === 'number' ? f.line : undefined,
    String(f.problem),
    typeof f.hint === 'string' ? f.hint : undefined,
  );
}
