/** One planner of a run's threads and memory: row threads, the Parquet read thread, encoder threads, young generations. */
import { availableParallelism } from 'node:os';
import type { OutputFormatName } from '../io/format-names.js';

/**
 * `--threads N`: worker threads that parse a CSV input, normalize and hash its identifiers, and encode the
 * output (for JSONL input: only encode the output). The defaults follow what `npm run bench -- --threads
 * 0,1,2,3` prints per setting (rows/s, peak RSS, CPU of the process and of its main thread; see npm run bench):
 *
 * - `map` keeps the main thread busy with batching, HTTP, encryption and the state file, so it takes
 *   cores - 1 threads. Past 3 the main thread, not the threads, is the bound, so more only cost memory.
 * - `hash` leaves the main thread only reading and writing, a fraction of what a thread does per row, so it
 *   takes one thread per core, up to 4.
 *
 * Each thread costs tens of MB. 0 runs everything on the main thread; the output is the same bytes whatever N.
 */
export function defaultMapThreads(cores = availableParallelism()): number {
  return Math.min(3, Math.max(1, cores - 1));
}

export function defaultHashThreads(cores = availableParallelism()): number {
  return Math.min(4, Math.max(1, cores));
}

/**
 * Below this many bytes of plain input, `auto` threads means none: starting a row thread costs more CPU and start-up
 * time than such an input's rows take on the main thread (`npm run bench -- --only small --threads 0,1` weighs the two).
 */
export const SMALL_INPUT_BYTES = 1 << 20;

/**
 * The young generation of each row thread, in MB: a trade between speed and memory. `hash` has the process to
 * itself and takes the larger one, for speed. `map` shares the process with the engine's own heap, so it takes
 * the smaller one: a larger one ran only a little faster and raised the peak RSS more than it was worth. To weigh
 * another size, change it here and compare rows/s and peak RSS of `npm run bench -- --only map1m,map5m,hash`
 * before and after (see npm run bench).
 */
export const YOUNG_GENERATION_MB = { map: 16, hash: 32 } as const;

/** The machine's default of the command, or none for a small input. */
function autoThreads(request: ThreadRequest): number {
  if (request.inputBytes !== undefined && request.inputBytes < SMALL_INPUT_BYTES) return 0;
  return request.command === 'map' ? defaultMapThreads() : defaultHashThreads();
}

/** What a run asks for: the user's --threads and what the run writes. */
export interface ThreadRequest {
  command: 'map' | 'hash';
  /** --threads: a number, 'auto' for the machine's default of the command, absent for none (the main thread). */
  threads?: number | 'auto' | undefined;
  /** The input's bytes when known (plain local files: run-input.ts plainInputBytes); a small one needs no thread. */
  inputBytes?: number | undefined;
  /** A dry run hands nothing on: row threads would keep every piece. */
  dryRun?: boolean | undefined;
  /** --output-dir: the rows are cut back into their parts as they are written, so they are read on this thread. */
  outputDir: boolean;
  outputFormat: OutputFormatName;
}

/** Where a run's work goes, decided once. */
export interface ThreadPlan {
  /** --threads as decided (absent: none asked for). */
  threads: number | undefined;
  /** Row threads that parse a CSV input cut here into record-aligned pieces; 0: it is parsed on this thread. */
  rowThreads: number;
  /** A Parquet input read on a thread of its own, which keeps and encodes its rows. */
  readThread: boolean;
  /** The row threads of the engine, once the input is open (as pieces, or as rows). */
  engineThreads(pieces: boolean): number;
  /** The sink's encoder threads: none when the row threads encode the rows themselves (absent: none asked for). */
  encoderThreads(pieces: boolean): number | undefined;
  /** The young generation of each row thread, in MB. */
  rowThreadYoungGenerationMb: number;
  /**
   * Whether the main thread's young generation stays bounded (young-generation.ts), once the input is open: it
   * pays only where this thread has the least to do, a Parquet input read, and its output encoded, on a thread of
   * their own; every other run needs this thread's speed more.
   */
  keepsYoungGenerationBounded(readOnItsThread: boolean): boolean;
}

export function planThreads(request: ThreadRequest): ThreadPlan {
  const threads = request.threads === 'auto' ? autoThreads(request) : request.threads;
  const parquetOut = request.outputFormat === 'parquet';
  // a Parquet output is written from rows by its sink, while the row threads write text
  const rowThreads = request.dryRun === true || request.outputDir || parquetOut ? 0 : (threads ?? 0);
  return {
    threads,
    rowThreads,
    readThread: request.command === 'map' && (threads ?? 0) > 0 && !request.outputDir,
    engineThreads: (pieces) => threads ?? (pieces ? 1 : 0),
    encoderThreads: (pieces) => (pieces ? undefined : threads),
    rowThreadYoungGenerationMb: YOUNG_GENERATION_MB[request.command],
    keepsYoungGenerationBounded: (readOnItsThread) => request.command === 'map' && readOnItsThread && parquetOut,
  };
}
