/** The whole map run, composed once: an input, the engine, the service and the output, for the CLI and the library. */
import type { ServiceClient } from '../../client/index.js';
import {
  MapEngine,
  type EngineColumn,
  type EngineState,
  type MapBatchFn,
  type MapRunCounts,
  type ThreadedEngineState,
  type MapRunResult,
} from '../map/map-engine.js';
import { defaultLayout, outputColumns, outputRows, outputRowsV2, type ResultLayout } from '../map/result-columns.js';
import type { RowChunk } from '../map/row-chunk.js';
import type { AdaptiveConcurrency } from '../run/adaptive-limiter.js';
import { rowFormatOf } from '../io/output/row-encoders.js';
import type { InputRow, TableSink, TableSource } from '../io/table.js';
import type { ColumnType, TypedHeader } from '../io/typed-cells.js';
import { YOUNG_GENERATION_MB } from '../run/run-plan.js';
import { EncodedWrites, RowThreads } from '../threads/row-threads.js';
import { isPreparingSource } from '../threads/parquet-read-thread.js';
import { isPieceSource, type TableInput } from '../threads/table-input.js';
import { mapBatchV2 } from '../v2/map-v2.js';

/** Where the answered rows go. */
export type MapOutput =
  /** Output rows (the input's cells, then the result columns) written to a sink; rows with a problem also to `rejects`. */
  | {
      kind: 'table';
      sink: TableSink;
      rejects?: TableSink | undefined;
      /** Parquet: the rows are written by the sink itself, so no row thread encodes them. */
      format: 'csv' | 'tsv' | 'jsonl' | 'parquet';
      header: readonly string[];
      /** JSONL and Parquet: how each column is typed (mapOutputColumns); absent: every cell a string. */
      types?: readonly ColumnType[] | undefined;
    }
  /** Answered chunks in input order, for a caller that reads the results itself (the library's mapRows). */
  | { kind: 'chunks'; onChunk(chunk: RowChunk): Promise<void> };

export interface MapJob {
  /** An opened input (pieces for the row threads, or parsed rows), or chunks of rows given by a program. */
  input: TableInput | AsyncIterable<InputRow[]>;
  columns: readonly EngineColumn[];
  /** mapV3Answers when it has it (the packed answers cost the main thread less), else mapV3. */
  client: Pick<ServiceClient, 'mapV3' | 'mapV2' | 'mapV3Answers'>;
  /** The concurrency limiter the client's 429s lower (a map connection always has one). */
  limiter: AdaptiveConcurrency | undefined;
  output: MapOutput;
  /** v3 (default), or the deprecated v2 map with salt buckets. */
  api?: 'v3' | 'v2' | undefined;
  /** Which input columns, result names, hashes and time format the table output has; default: defaultLayout. */
  layout?: ResultLayout | undefined;
  /** Row threads for a CSV input cut into pieces (at least 1 when the input is pieces). */
  threads?: number | undefined;
  state?: EngineState | ThreadedEngineState | undefined;
  batchSize?: number | undefined;
  failFast?: boolean | undefined;
  /** The client's attempts per request, for the reason text of a failed batch. */
  maxAttempts?: number | undefined;
  /** Aborting it stops reading; requests in flight get a grace period to finish and commit. */
  signal?: AbortSignal | undefined;
  graceMs?: number | undefined;
  /** Now, in Unix seconds: whether a stored mapping is still fresh. */
  nowS?: (() => number) | undefined;
  /** After each chunk is handed on, with the running counts. */
  onProgress?: ((counts: MapRunCounts) => void) | undefined;
}

/** The output columns of a map run: the (kept) input columns, then the result columns of each identifier column. */
export function mapOutputColumns(
  inputHeader: readonly string[],
  columns: readonly EngineColumn[],
  api: 'v3' | 'v2' = 'v3',
  layout: ResultLayout = defaultLayout(columns),
): TypedHeader {
  return outputColumns(inputHeader, columns, layout, api);
}

/** The output header of a map run (see mapOutputColumns). */
export function mapOutputHeader(
  inputHeader: readonly string[],
  columns: readonly EngineColumn[],
  api: 'v3' | 'v2' = 'v3',
  layout?: ResultLayout,
): string[] {
  return mapOutputColumns(inputHeader, columns, api, layout).header;
}

/**
 * Runs a whole map: prepares the input (on row threads when it comes as pieces), sends it through the engine, and
 * hands answered rows on in input order. Resolves with the outcome and counts; the caller commits or aborts its
 * sinks by the outcome. Encoded output still queued is written before a completed run resolves.
 */
export async function runMapJob(job: MapJob): Promise<MapRunResult> {
  const v2 = job.api === 'v2';
  const { input, output } = job;
  const pieces = isTableInput(input) && isPieceSource(input) ? input : undefined;
  // the row threads encode output text; Parquet is written by its sink from rows, so it gets none
  const encoded =
    output.kind === 'table' && output.format !== 'parquet'
      ? rowFormatOf(output.format, output.header, output.types)
      : undefined;
  if (pieces !== undefined && output.kind === 'table' && encoded === undefined)
    throw new Error('Parquet output takes parsed rows: open the input without row threads (openTableInput with 0)');
  const threads =
    pieces !== undefined && encoded !== undefined
      ? new RowThreads(
          {
            name: pieces.name,
            csv: pieces.settings,
            width: pieces.width,
            columns: [...job.columns],
            format: encoded,
            v2,
            layout: job.layout ?? defaultLayout(job.columns),
          },
          job.threads ?? 1,
          YOUNG_GENERATION_MB.map,
        )
      : undefined;
  // a Parquet input read on its own thread: it prepares the rows there and, for a text output, keeps and encodes them
  const preparing = isTableInput(input) && isPreparingSource(input) ? input : undefined;
  // a Parquet output of rows the reading thread keeps is encoded there too: one thread (and its memory) fewer
  const fileLayout =
    preparing !== undefined && output.kind === 'table' && encoded === undefined
      ? output.sink.encodeElsewhere?.()
      : undefined;
  const keptThere =
    preparing !== undefined && output.kind === 'table'
      ? {
          format: encoded ?? {
            format: 'parquet' as const,
            width: output.header.length,
            ...(fileLayout !== undefined ? { file: fileLayout } : {}),
          },
          v2,
          layout: job.layout ?? defaultLayout(job.columns),
        }
      : undefined;
  const encoding: ChunkEncoding | undefined =
    threads ??
    (keptThere !== undefined && preparing !== undefined
      ? { threads: 1, encode: (chunk, rejects) => preparing.encode(chunk, rejects) }
      : undefined);
  try {
    const onChunk = chunkWriter(job, encoding);
    const engine: MapEngine = new MapEngine({
      columns: job.columns,
      mapBatch: v2 ? mapBatchV2(job.client) : mapBatchV3(job.client),
      ...(job.limiter !== undefined ? { limiter: job.limiter } : {}),
      ...(job.state !== undefined ? { state: job.state } : {}),
      ...(job.batchSize !== undefined ? { batchSize: job.batchSize } : {}),
      failFast: job.failFast === true,
      // --emit-hash: each chunk keeps the hashes it sent until it is written (the row threads keep their own)
      keepSentHashes: job.layout?.emitHash === true && encoding === undefined,
      ...(job.maxAttempts !== undefined ? { maxAttempts: job.maxAttempts } : {}),
      ...(job.signal !== undefined ? { signal: job.signal } : {}),
      ...(job.graceMs !== undefined ? { graceMs: job.graceMs } : {}),
      ...(job.nowS !== undefined ? { nowS: job.nowS } : {}),
      onChunk: async (chunk) => {
        await onChunk.write(chunk);
        job.onProgress?.(engine.counts);
      },
    });
    const result = await (threads !== undefined && pieces !== undefined
      ? engine.runPrepared(threads.prepared(pieces))
      : preparing !== undefined
        ? engine.runPrepared(preparing.preparedChunks(job.columns, keptThere))
        : engine.run(isTableInput(input) ? (input as TableSource).rows() : input));
    if (result.outcome.kind === 'completed') {
      await onChunk.flush();
      if (fileLayout !== undefined && preparing !== undefined && output.kind === 'table')
        output.sink.endFile?.(await preparing.finishFile());
    }
    return result;
  } finally {
    await threads?.close();
    await preparing?.closeThread();
  }
}

/** Who encodes answered chunks whose rows a worker thread keeps: the CSV row threads, or a Parquet reading thread. */
interface ChunkEncoding {
  readonly threads: number;
  encode(chunk: RowChunk, rejects: boolean): Promise<{ bytes: Uint8Array; rejectBytes: Uint8Array | null }>;
}

function isTableInput(input: MapJob['input']): input is TableInput {
  return 'header' in input && 'name' in input;
}

/** How answered chunks reach the output: encoded by the row threads that hold their rows, or here. */
function chunkWriter(
  job: MapJob,
  threads: ChunkEncoding | undefined,
): { write(chunk: RowChunk): Promise<void>; flush(): Promise<void> } {
  const output = job.output;
  if (output.kind === 'chunks') return { write: (chunk) => output.onChunk(chunk), flush: () => Promise.resolve() };
  const { sink, rejects } = output;
  if (threads !== undefined) {
    const encoded = new EncodedWrites(sink, rejects, threads.threads * 4);
    return {
      write: (chunk) => encoded.add(threads.encode(chunk, rejects !== undefined)),
      flush: () => encoded.flush(),
    };
  }
  const toOutputRows = job.api === 'v2' ? outputRowsV2 : outputRows;
  const layout = job.layout;
  return {
    write: async (chunk) => {
      const rejected: string[][] | null = rejects !== undefined ? [] : null;
      const rows = toOutputRows(chunk, rejected, layout);
      await sink.writeRows(rows);
      if (rejects !== undefined && rejected !== null && rejected.length > 0) await rejects.writeRows(rejected);
    },
    flush: () => Promise.resolve(),
  };
}

function mapBatchV3(client: MapJob['client']): MapBatchFn {
  const { mapV3Answers } = client;
  if (mapV3Answers === undefined) return (request, signal) => client.mapV3(request, { signal });
  return (request, signal) => mapV3Answers.call(client, request, { signal });
}
