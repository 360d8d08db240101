/** Reads a Parquet input's rows on a worker thread, and prepares their identifier cells there for a map run. */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { EngineChunk } from '../map/map-engine.js';
import type { PreparedRows } from '../map/prepare-rows.js';
import type { IdentifierColumn } from '../table/identifier-columns.js';
import type { ParquetColumn, ParquetTableSource } from '../table/parquet-source.js';
import { unpackRows, type PackedRows } from '../table/row-encoders.js';
import { InputError, type InputRow, type SourceProblemCounts } from '../table/table.js';
import { WorkerPool, type ThrownInWorker } from '../workers/worker-pool.js';

/** What the thread is told at its start. Plain data. */
export interface ParquetReadConfig {
  path: string;
  chunkRows?: number;
  /** The identifier columns to prepare (map); absent: rows only. */
  columns?: IdentifierColumn[];
}

/** One chunk of rows (their lines follow each other from firstLine), or the end; bytes read so far either way. */
export type ParquetReadAnswer =
  | { done: false; firstLine: number; rows: PackedRows; prepared?: PreparedRows; bytesRead: number }
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

/** A source whose rows come with their identifier cells already prepared, for MapEngine.runPrepared(). */
export interface PreparingSource {
  preparedChunks(columns: readonly IdentifierColumn[]): AsyncIterable<EngineChunk>;
}

export function isPreparingSource(input: object): input is PreparingSource {
  return 'preparedChunks' in input;
}

/**
 * A Parquet input whose rows are decoded on a worker thread (which opens the file again) and handed over packed:
 * one string and two arrays of lengths per chunk, which cost far less to pass than a string per cell. For a map
 * run the thread also prepares (normalizes and hashes) the identifier cells. The footer was read here, by the
 * source this wraps, so a file that is not Parquet fails before any thread starts.
 */
export class ParquetThreadSource implements ParquetTableSource, PreparingSource {
  readonly header: string[];
  readonly notes: string[];
  readonly name: string;
  readonly totalBytes: number | undefined;
  readonly columns: readonly ParquetColumn[];
  private consumed = 0;
  private iterated = false;

  constructor(
    private readonly inner: ParquetTableSource,
    private readonly chunkRows: number | undefined,
  ) {
    this.header = inner.header;
    this.notes = inner.notes;
    this.name = inner.name;
    this.totalBytes = inner.totalBytes;
    this.columns = inner.columns;
  }

  bytesRead(): number {
    return this.consumed;
  }

  problems(): SourceProblemCounts {
    return this.inner.problems();
  }

  async *rows(): AsyncGenerator<InputRow[]> {
    for await (const chunk of this.chunks(undefined)) yield chunk.rows;
  }

  async *preparedChunks(columns: readonly IdentifierColumn[]): AsyncGenerator<EngineChunk> {
    for await (const chunk of this.chunks(columns))
      yield { rows: chunk.rows, prepared: chunk.prepared as PreparedRows };
  }

  private async *chunks(
    columns: readonly IdentifierColumn[] | undefined,
  ): AsyncGenerator<{ rows: InputRow[]; prepared?: PreparedRows }> {
    if (this.iterated) throw new Error(`${this.name}: rows() can be iterated only once`);
    this.iterated = true;
    const config: ParquetReadConfig = {
      path: this.name,
      ...(this.chunkRows !== undefined ? { chunkRows: this.chunkRows } : {}),
      ...(columns !== undefined ? { columns: [...columns] } : {}),
    };
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
        this.consumed = answer.bytesRead;
        if (answer.done) return;
        ask();
        const cells = unpackRows(answer.rows);
        const rows: InputRow[] = new Array(cells.length);
        for (let r = 0; r < cells.length; r++) rows[r] = { line: answer.firstLine + r, cells: cells[r] };
        yield answer.prepared === undefined ? { rows } : { rows, prepared: answer.prepared };
      }
    } finally {
      queue.length = 0;
      await pool.close();
    }
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
