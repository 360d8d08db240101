/** Decodes whole row groups of a Parquet file whose columns are all text with parquet-wasm, as UTF-8 columns. */
import { openAsBlob } from 'node:fs';
import { type Data, type RecordBatch, tableFromIPC, Type } from 'apache-arrow';
import type { ParquetFile } from 'parquet-wasm';
import { type Utf8Chunk, type Utf8Column, utf8ColumnOfRuns } from './utf8-columns.js';

/**
 * Rows per batch that the decoder hands over: several chunks at once, so each crossing out of WebAssembly
 * memory carries enough rows to be worth its fixed cost, and few enough that a batch stays small.
 */
const BATCH_ROWS = 10_000;

/**
 * Arrow types whose values are a cell's bytes exactly as stored, found by offsets: the types the decoder gives
 * a BYTE_ARRAY column that is a string or plain bytes. Any other type (a dictionary, a view) is read as today.
 */
const TEXT_TYPES: ReadonlySet<Type> = new Set([Type.Utf8, Type.LargeUtf8, Type.Binary, Type.LargeBinary]);

/**
 * The row groups of one Parquet file, read by the compiled Rust decoder (parquet-wasm): only the footer and the
 * asked-for group's column chunks are read from disk (a Blob that reads ranges), and a group comes out as record
 * batches whose text columns are already one run of bytes with offsets, which become chunks without a string per
 * cell. Its WebAssembly memory grows to what the biggest group read needs and is never given back, so callers
 * use it for groups of bounded size only.
 */
export class ArrowGroups {
  /** Set once the decoder panicked: its memory is then in no state to be used again. */
  private panic: Error | undefined;
  /** Rejects the step being awaited, if any, when the decoder panics. */
  private failStep: ((err: Error) => void) | undefined;
  private readonly onUncaught = (err: Error): void => {
    if (err instanceof Error && err.name === 'RuntimeError') {
      this.panic = err;
      this.failStep?.(err);
      return;
    }
    // not the decoder's: fails the thread as it would have without this listener
    process.removeListener('uncaughtException', this.onUncaught);
    setImmediate(() => {
      throw err;
    });
  };

  private constructor(
    private readonly file: ParquetFile,
    private readonly width: number,
  ) {
    // a panic of the decoder (corrupt data it does not check) is thrown from its own task queue, not as a
    // rejection of what was awaited, which would then wait for ever: it is caught here and made that rejection
    process.on('uncaughtException', this.onUncaught);
  }

  /**
   * Opens `path` for reading its groups, or undefined when a top-level column would not come out as bytes as
   * stored, or not in the order of `header` (the caller then reads the file another way).
   */
  static async open(path: string, header: readonly string[]): Promise<ArrowGroups | undefined> {
    // loaded only when a file is read this way: its WebAssembly costs memory other runs need not pay
    const { ParquetFile } = await import('parquet-wasm');
    const file = await ParquetFile.fromFile(await openAsBlob(path));
    try {
      const fields = tableFromIPC(file.schema().intoIPCStream()).schema.fields;
      const plain =
        fields.length === header.length &&
        fields.every((field, c) => field.name === header[c] && TEXT_TYPES.has(field.typeId));
      if (plain) return new ArrowGroups(file, header.length);
    } catch {
      // a schema the decoder cannot give: read the file the other way
    }
    file.free();
    return undefined;
  }

  /** The rows of group `group` (`rows` of them, the first being line `firstLine`), in chunks of `chunkRows`. */
  async *group(group: number, firstLine: number, rows: number, chunkRows: number): AsyncGenerator<Utf8Chunk> {
    const stream = (await this.step(
      this.file.stream({ rowGroups: [group], batchSize: Math.max(BATCH_ROWS, chunkRows) }),
    )) as ReadableStream<{ intoIPCStream(): Uint8Array }>;
    const reader = stream.getReader();
    let line = firstLine;
    try {
      for (;;) {
        const next = await this.step(reader.read());
        if (next.done) break;
        for (const batch of tableFromIPC(next.value.intoIPCStream()).batches) {
          yield* this.chunksOf(batch, line, chunkRows);
          line += batch.numRows;
        }
      }
    } finally {
      if (this.panic === undefined) await reader.cancel().catch(() => undefined);
    }
    if (line - firstLine !== rows) throw new Error(`row group ${group} gave ${line - firstLine} rows, not ${rows}`);
  }

  close(): void {
    process.removeListener('uncaughtException', this.onUncaught);
    if (this.panic === undefined) this.file.free();
  }

  /** `pending`, or its failure when the decoder panics first. */
  private step<T>(pending: Promise<T>): Promise<T> {
    if (this.panic !== undefined) return Promise.reject(this.panic);
    return new Promise<T>((resolve, reject) => {
      const fail = (err: Error) => reject(err);
      this.failStep = fail;
      pending.then(resolve, reject).finally(() => {
        // the next step may have begun already
        if (this.failStep === fail) this.failStep = undefined;
      });
    });
  }

  private *chunksOf(batch: RecordBatch, firstLine: number, chunkRows: number): Generator<Utf8Chunk> {
    const columns = batch.data.children as Data[];
    if (columns.length !== this.width) throw new Error(`a batch of ${columns.length} columns, not ${this.width}`);
    for (let from = 0; from < batch.numRows; from += chunkRows) {
      const to = Math.min(batch.numRows, from + chunkRows);
      yield { firstLine: firstLine + from, rows: to - from, columns: columns.map((data) => columnOf(data, from, to)) };
    }
  }
}

/** Rows `from` to `to` of one text column of a batch; a null cell is empty. */
function columnOf(data: Data, from: number, to: number): Utf8Column {
  const offsets = data.valueOffsets as Int32Array | BigInt64Array;
  const values = data.values as Uint8Array;
  const valid = data.nullCount > 0 ? (row: number) => data.getValid(row) : undefined;
  return utf8ColumnOfRuns(values, offsets, valid, from, to);
}
