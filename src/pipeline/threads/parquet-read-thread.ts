/**
 * Reads a Parquet input's rows on a worker thread, prepares their identifier cells there for a map run, and, for
 * a text output, keeps the rows there until their answers come back and encodes them there.
 */
import type { EngineChunk } from '../map/map-engine.js';
import type { PreparedRows } from '../map/prepare-rows.js';
import type { ResultLayout } from '../map/result-columns.js';
import type { RowChunk } from '../map/row-chunk.js';
import type { IdentifierColumn } from '../map/identifier-columns.js';
import type { ParquetLayout } from '../io/parquet/parquet-encoder.js';
import type { ParquetColumn, ParquetTableSource } from '../io/parquet/parquet-source.js';
import { unpackRows, type PackedRows, type RowFormat } from '../io/output/row-encoders.js';
import type { InputRow, SourceProblemCounts } from '../io/table.js';
import { WorkerPool } from '../workers/worker-pool.js';
import { compiledScriptPresent } from '../workers/compiled-script.js';
import { reviveInputError } from './thread-errors.js';
import { answerBuffers, packAnswers, type SlotAnswers } from './slot-answers.js';

/**
 * How the thread writes a map run's output rows when it keeps them: plain data. A Parquet output gets them as
 * blocks of UTF-8 rows (row-blocks.ts utf8RowBlock), which its sink hands on to its own encoding thread.
 */
export interface ParquetOutputConfig {
  /**
   * A Parquet output given `file` (the sink's encodeElsewhere) is encoded on the thread itself: its encode tasks
   * answer with the file's bytes, and finishFile() with its last bytes.
   */
  format: RowFormat | { format: 'parquet'; width: number; file?: ParquetLayout };
  /** map --api v2 result columns. */
  v2: boolean;
  layout: ResultLayout;
}

/** What the thread is told at its start. Plain data. */
export interface ParquetReadConfig {
  path: string;
  chunkRows: number;
  /** The identifier columns to prepare (map); absent: rows only. */
  columns?: IdentifierColumn[];
  /** With columns: the rows stay in the thread, which encodes them with their answers. */
  output?: ParquetOutputConfig;
}

export type ParquetReadTask =
  | { task: 'next' }
  /** Append the answers' cells to the kept rows of `piece`, encode them (and the --rejects rows), let them go. */
  | { task: 'encode'; piece: number; answers: SlotAnswers; rejects: boolean }
  /** The last bytes of the Parquet file the thread encodes (after every piece was encoded). */
  | { task: 'finish' };

/** Encoded output text of a piece, and of its --rejects rows. */
export interface EncodedPiece {
  bytes: Uint8Array;
  rejectBytes: Uint8Array | null;
}

export type ParquetReadAnswer =
  /** One chunk: its rows (lines following each other from firstLine), or the piece the thread keeps them as. */
  | {
      task: 'next';
      done: false;
      firstLine: number;
      rows?: PackedRows;
      piece?: number;
      rowCount: number;
      prepared?: PreparedRows;
      bytesRead: number;
    }
  | { task: 'next'; done: true; bytesRead: number }
  | { task: 'encode'; encoded: EncodedPiece }
  | { task: 'finish'; bytes: Uint8Array };

/** Chunks asked for ahead of the one being used: the thread decodes while this thread maps. */
const CHUNKS_AHEAD = 4;

/**
 * V8 heap limits of the reading thread. What it decodes is one column of one slice at a time, made into bytes
 * outside the heap before the next (parquet-source.ts utf8Chunks), so little outlives a young collection and
 * the young generation can be as small as the CSV row threads' (run/run-plan.ts YOUNG_GENERATION_MB.map): a
 * bigger one costs its size in peak memory and saves little work. The old one holds little.
 */
const READ_THREAD_LIMITS = { maxYoungGenerationSizeMb: 16, maxOldGenerationSizeMb: 256 };

/**
 * The limits when the thread encodes a Parquet output too: the encoder's buffers of each batch live outside the
 * heap and are freed only when the objects that hold them are collected, so a smaller young generation, collected
 * more often, frees them sooner (for more scavenging work; see bench/formats.mjs).
 */
const READ_AND_ENCODE_THREAD_LIMITS = { maxYoungGenerationSizeMb: 8, maxOldGenerationSizeMb: 256 };

/** Compiled beside this module in dist/. */
const READ_WORKER = new URL('./parquet-read-thread-entry.js', import.meta.url);

/** Run from the TypeScript sources (vitest) there is no compiled thread script: the rows are read here. */
export function parquetReadThreadAvailable(): boolean {
  return compiledScriptPresent(READ_WORKER);
}

/**
 * A source whose rows come with their identifier cells already prepared, for MapEngine.runPrepared(). Given an
 * output, the rows stay where they were read (chunks carry a ticket, not rows) and encode() writes them;
 * closeThread() lets the thread go once the last chunk is encoded.
 */
export interface PreparingSource {
  preparedChunks(columns: readonly IdentifierColumn[], output?: ParquetOutputConfig): AsyncIterable<EngineChunk>;
  encode(chunk: RowChunk, rejects: boolean): Promise<EncodedPiece>;
  /** With a Parquet output the thread encodes (ParquetOutputConfig file): the file's last bytes. */
  finishFile(): Promise<Uint8Array>;
  closeThread(): Promise<void>;
}

export function isPreparingSource(input: object): input is PreparingSource {
  return 'preparedChunks' in input;
}

/**
 * A Parquet input whose rows are decoded on a worker thread (which opens the file again) and handed over packed:
 * one string and two arrays of lengths per chunk, which cost far less to pass than a string per cell. For a map
 * run the thread also prepares (normalizes and hashes) the identifier cells, and for a text output it keeps the
 * rows and encodes them once answered, as the CSV row threads do. The footer was read here, by the source this
 * wraps, so a file that is not Parquet fails before any thread starts.
 */
export class ParquetThreadSource implements ParquetTableSource, PreparingSource {
  readonly header: string[];
  readonly notes: string[];
  readonly name: string;
  readonly totalBytes: number | undefined;
  readonly columns: readonly ParquetColumn[];
  private consumed = 0;
  private iterated = false;
  private pool: WorkerPool<ParquetReadTask, ParquetReadAnswer> | undefined;

  constructor(
    private readonly inner: ParquetTableSource,
    private readonly chunkRows: number,
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
    try {
      for await (const chunk of this.chunks({ path: this.name, chunkRows: this.chunkRows })) yield chunk.rows ?? [];
    } finally {
      await this.closeThread();
    }
  }

  preparedChunks(columns: readonly IdentifierColumn[], output?: ParquetOutputConfig): AsyncIterable<EngineChunk> {
    const config: ParquetReadConfig = {
      path: this.name,
      chunkRows: this.chunkRows,
      columns: [...columns],
      ...(output !== undefined ? { output } : {}),
    };
    return this.chunks(config);
  }

  encode(chunk: RowChunk, rejects: boolean): Promise<EncodedPiece> {
    const ticket = chunk.ticket;
    if (ticket === undefined || this.pool === undefined)
      return Promise.reject(new Error(`${this.name}: the chunk's rows are not kept by the reading thread`));
    const answers = packAnswers(chunk);
    const transfer = answerBuffers(answers);
    return this.pool.runOn(0, { task: 'encode', piece: ticket.piece, answers, rejects }, transfer).then((answer) => {
      if (answer.task !== 'encode') throw new Error(`the reading thread answered an encode task with '${answer.task}'`);
      return answer.encoded;
    });
  }

  finishFile(): Promise<Uint8Array> {
    if (this.pool === undefined) return Promise.reject(new Error(`${this.name}: no reading thread to finish`));
    return this.pool.runOn(0, { task: 'finish' }).then((answer) => {
      if (answer.task !== 'finish') throw new Error(`the reading thread answered a finish task with '${answer.task}'`);
      return answer.bytes;
    });
  }

  async closeThread(): Promise<void> {
    await this.pool?.close();
  }

  private async *chunks(config: ParquetReadConfig): AsyncGenerator<EngineChunk> {
    if (this.iterated) throw new Error(`${this.name}: rows() can be iterated only once`);
    this.iterated = true;
    const pool = new WorkerPool<ParquetReadTask, ParquetReadAnswer>({
      script: READ_WORKER,
      size: 1,
      workerData: config,
      purpose: 'reading Parquet',
      revive: reviveInputError,
      resourceLimits: encodesFile(config) ? READ_AND_ENCODE_THREAD_LIMITS : READ_THREAD_LIMITS,
    });
    this.pool = pool;
    const queue: Promise<ParquetReadAnswer>[] = [];
    const ask = () => {
      const answer = pool.runOn(0, { task: 'next' });
      // awaited in order below; until then a failure must not count as unhandled
      answer.catch(() => undefined);
      queue.push(answer);
    };
    try {
      for (let i = 0; i < CHUNKS_AHEAD; i++) ask();
      for (;;) {
        const answer = await (queue.shift() as Promise<ParquetReadAnswer>);
        if (answer.task !== 'next') throw new Error(`the reading thread answered a read with '${answer.task}'`);
        this.consumed = answer.bytesRead;
        if (answer.done) return;
        ask();
        const prepared = answer.prepared as PreparedRows;
        if (answer.piece !== undefined) {
          yield { prepared, ticket: { thread: 0, piece: answer.piece } };
          continue;
        }
        const cells = unpackRows(answer.rows as PackedRows);
        const rows: InputRow[] = new Array(cells.length);
        for (let r = 0; r < cells.length; r++) rows[r] = { line: answer.firstLine + r, cells: cells[r] };
        yield { rows, prepared };
      }
    } finally {
      queue.length = 0;
      // the kept rows are still to be encoded once answered: the caller lets the thread go (closeThread)
      if (config.output === undefined) await pool.close();
    }
  }
}

/** Whether the thread is to encode a Parquet output file itself. */
/** The thread encodes the Parquet output file as well as reading the input. */
export function encodesFile(config: ParquetReadConfig): boolean {
  const format = config.output?.format;
  return format !== undefined && format.format === 'parquet' && format.file !== undefined;
}
