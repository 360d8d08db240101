import type { IdentifierColumn } from '../map/identifier-columns.js';
import type { CsvPiece } from '../io/csv/piece-cutter.js';
import type { CsvPieceSource } from '../io/csv/piece-source.js';
import type { EngineChunk } from '../map/map-engine.js';
import type { HashCounts } from '../hash/hash-rows.js';
import type { PreparedRows } from '../map/prepare-rows.js';
import type { RowChunk } from '../map/row-chunk.js';
import type { RowFormat } from '../io/output/row-encoders.js';
import type { ResultLayout } from '../map/result-columns.js';
import type { SourceProblemCounts, TableSink } from '../io/table.js';
import { WorkerPool } from '../workers/worker-pool.js';
import { compiledScriptPresent } from '../workers/compiled-script.js';
import { reviveInputError } from './thread-errors.js';
import { answerBuffers, packAnswers, type SlotAnswers } from './slot-answers.js';

/** What every row thread is told once, at its start. Plain data. */
export interface RowThreadConfig {
  /** The input's name, for error messages. */
  name: string;
  csv: { delimiter: string; encoding: 'utf8' | 'latin1' };
  /** Cells per input row (the header's). */
  width: number;
  columns: IdentifierColumn[];
  /** How output rows are encoded. */
  format: RowFormat;
  /** map --api v2: raw_uid, bucket_id, status, reason per identifier column. */
  v2: boolean;
  /** The output's kept input columns (map and hash), result names, hashes and time format (map); absent: the default. */
  layout?: ResultLayout;
}

export type RowThreadTask =
  /** Parse a piece, prepare its identifier cells, and keep its rows under `piece`. */
  | { task: 'prepare'; piece: number; bytes: Uint8Array; startLine: number }
  /**
   * Append the answers' cells to the kept rows of `piece`, encode them (and the --rejects rows), let them go.
   * `into`: the buffer of an earlier answer's bytes, written, to be written into again.
   */
  | { task: 'encode'; piece: number; answers: SlotAnswers; rejects: boolean; into?: ArrayBuffer | undefined }
  /** `hash`: parse a piece and encode its rows with their hashes, in one go. */
  | { task: 'hash'; bytes: Uint8Array; startLine: number };

export type RowThreadAnswer =
  | { task: 'prepare'; prepared: PreparedRows; problems: SourceProblemCounts }
  /** `reusable`: `bytes` is a view of a buffer worth giving back as a later task's `into`. */
  | { task: 'encode'; bytes: Uint8Array; rejectBytes: Uint8Array | null; reusable: boolean }
  | { task: 'hash'; bytes: Uint8Array; counts: HashCounts; problems: SourceProblemCounts };

/** Compiled beside this module in dist/. */
const ROW_THREAD = new URL('./row-thread-entry.js', import.meta.url);

/** Pieces parsed ahead per thread: enough to keep every thread busy while the main thread takes the oldest. */
const AHEAD_PER_THREAD = 3;

/**
 * V8 heap limits of each thread. A task allocates a few MB (a string per cell, the output text) that die with
 * it: a young generation that holds several tasks' worth is scavenged less often, so less of it is copied; its
 * size is the caller's (run/run-plan.ts plans it). What a thread keeps between tasks (the pieces' bytes) lives
 * outside the heap, so a small old generation is plenty, and its limit also makes V8 grow it less eagerly, so
 * the worker heaps stay smaller. 256 MB still holds a piece with a single 16 MB record, the longest a record may be.
 */
const OLD_GENERATION_MB = 256;

/**
 * `--threads N` for CSV input: N worker threads parse the input's pieces, prepare (normalize + hash) the
 * identifier cells and encode the output rows; the main thread reads, batches, sends and writes. A piece's rows
 * stay in the thread that parsed them until their answers come back, so only hashes and results cross over.
 * Answers are taken in input order, so the output is the same bytes as without threads.
 */
export class RowThreads {
  private readonly pool: WorkerPool<RowThreadTask, RowThreadAnswer>;
  private nextPiece = 0;
  /** Buffers of encoded pieces, written and given back, for the threads to write the next pieces into. */
  private readonly spares: ArrayBuffer[] = [];

  /** Run from the TypeScript sources (vitest) there is no compiled thread script: the caller stays single-threaded. */
  static available(): boolean {
    return compiledScriptPresent(ROW_THREAD);
  }

  constructor(
    config: RowThreadConfig,
    readonly threads: number,
    youngGenerationMb: number,
  ) {
    this.pool = new WorkerPool<RowThreadTask, RowThreadAnswer>({
      script: ROW_THREAD,
      size: threads,
      workerData: config,
      purpose: 'parsing and hashing rows',
      revive: reviveInputError,
      resourceLimits: { maxYoungGenerationSizeMb: youngGenerationMb, maxOldGenerationSizeMb: OLD_GENERATION_MB },
    });
  }

  /** The source's pieces, parsed and prepared by the threads, in input order; row problems go to the source. */
  prepared(source: CsvPieceSource): AsyncGenerator<EngineChunk> {
    return inOrder(source.pieces(), this.threads * AHEAD_PER_THREAD, (piece) => {
      const id = this.nextPiece++;
      const thread = this.pool.leastBusy();
      const bytes = copyOut(piece);
      return this.pool
        .runOn(thread, { task: 'prepare', piece: id, bytes, startLine: piece.startLine }, [bytes.buffer as ArrayBuffer])
        .then((answer) => {
          const a = expect(answer, 'prepare');
          source.addProblems(a.problems);
          return { prepared: a.prepared, ticket: { thread, piece: id } };
        });
    });
  }

  /** Encodes an answered chunk's rows, held by the thread that parsed them, with their result cells. */
  encode(chunk: RowChunk, rejects: boolean): Promise<EncodedPiece> {
    const ticket = chunk.ticket;
    if (ticket === undefined)
      return Promise.reject(new Error('RowThreads.encode: the chunk was not prepared by a row thread'));
    const answers = packAnswers(chunk);
    const transfer = answerBuffers(answers);
    const into = this.spares.pop();
    if (into !== undefined) transfer.push(into);
    return this.pool
      .runOn(ticket.thread, { task: 'encode', piece: ticket.piece, answers, rejects, into }, transfer)
      .then((answer) => {
        const { bytes, rejectBytes, reusable } = expect(answer, 'encode');
        if (!reusable) return { bytes, rejectBytes };
        return { bytes, rejectBytes, written: () => this.giveBack(bytes.buffer as ArrayBuffer) };
      });
  }

  /**
   * A written piece's buffer, kept for a thread to write a later piece into. As many are kept as pieces can be
   * encoded ahead of the writes; one more would only be memory.
   */
  private giveBack(buffer: ArrayBuffer): void {
    if (buffer.byteLength > 0 && this.spares.length < this.threads * AHEAD_PER_THREAD) this.spares.push(buffer);
  }

  /** `hash`: the source's pieces hashed and encoded by the threads, in input order; row problems go to the source. */
  hashed(source: CsvPieceSource): AsyncGenerator<{ bytes: Uint8Array; counts: HashCounts }> {
    return inOrder(source.pieces(), this.threads * AHEAD_PER_THREAD, (piece) => {
      const bytes = copyOut(piece);
      return this.pool
        .run({ task: 'hash', bytes, startLine: piece.startLine }, [bytes.buffer as ArrayBuffer])
        .then((answer) => {
          const a = expect(answer, 'hash');
          source.addProblems(a.problems);
          return { bytes: a.bytes, counts: a.counts };
        });
    });
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}

/** A chunk's output bytes; `written`, when given, is called once the sink is done with `bytes` (see writeEncoded). */
export interface EncodedPiece {
  bytes: Uint8Array;
  rejectBytes: Uint8Array | null;
  written?: () => void;
}

/**
 * Encoded chunks written in the order they were given, while later ones are still being encoded: at most
 * `ahead` wait, so a slow disk holds the engine back instead of letting encoded bytes pile up.
 */
export class EncodedWrites {
  private readonly queue: Promise<EncodedPiece>[] = [];

  constructor(
    private readonly out: TableSink,
    private readonly rejects: TableSink | undefined,
    private readonly ahead: number,
  ) {}

  async add(encoded: Promise<EncodedPiece>): Promise<void> {
    // awaited in order later; until then a failure must not count as unhandled
    encoded.catch(() => undefined);
    this.queue.push(encoded);
    while (this.queue.length > this.ahead) await this.writeOldest();
  }

  /** Writes everything still queued; call before committing the sinks. */
  async flush(): Promise<void> {
    while (this.queue.length > 0) await this.writeOldest();
  }

  private async writeOldest(): Promise<void> {
    const { bytes, rejectBytes, written } = await (this.queue.shift() as Promise<EncodedPiece>);
    await this.out.writeEncoded(bytes, written);
    if (rejectBytes !== null && this.rejects !== undefined) await this.rejects.writeEncoded(rejectBytes);
  }
}

/** Starts `start` on up to `ahead` items at once and yields the answers in the items' order. */
async function* inOrder<In, Out>(
  items: AsyncIterable<In>,
  ahead: number,
  start: (item: In) => Promise<Out>,
): AsyncGenerator<Out> {
  const queue: Promise<Out>[] = [];
  try {
    for await (const item of items) {
      const task = start(item);
      task.catch(() => undefined);
      queue.push(task);
      if (queue.length >= ahead) yield await (queue.shift() as Promise<Out>);
    }
    while (queue.length > 0) yield await (queue.shift() as Promise<Out>);
  } finally {
    queue.length = 0;
  }
}

/**
 * A piece's bytes in a buffer of their own, handed over (transferred) rather than cloned. The cutter makes each
 * piece its own buffer; a view into a shared one (which a transfer would empty for the others) is copied.
 */
function copyOut(piece: CsvPiece): Uint8Array {
  const b = piece.bytes;
  return b.byteOffset === 0 && b.byteLength === b.buffer.byteLength ? b : new Uint8Array(b);
}

function expect<K extends RowThreadAnswer['task']>(
  answer: RowThreadAnswer,
  task: K,
): Extract<RowThreadAnswer, { task: K }> {
  if (answer.task !== task) throw new Error(`row thread answered a '${answer.task}' task with '${task}' expected`);
  return answer as Extract<RowThreadAnswer, { task: K }>;
}
