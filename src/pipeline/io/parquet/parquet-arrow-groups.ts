/** Decodes whole row groups of a Parquet file whose columns are all text with parquet-wasm, as UTF-8 columns. */
import { openAsBlob } from 'node:fs';
import { tableFromIPC, Type } from 'apache-arrow';
import type { ParquetFile, RecordBatch } from 'parquet-wasm';
import { type Utf8Chunk, utf8ColumnOfRuns } from '../utf8-columns.js';

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
    // only while a step of the decoder is awaited: a trap at any other time is not the decoder's to explain
    if (err instanceof Error && err.name === 'RuntimeError' && this.failStep !== undefined) {
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
    /** Per column: its offsets are 64-bit (a large string or bytes type), not 32-bit. */
    private readonly large: readonly boolean[],
    /** The decoder's memory, where a batch's columns are read from. */
    private readonly memory: () => ArrayBuffer,
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
    const { ParquetFile, wasmMemory } = await import('parquet-wasm');
    const file = await ParquetFile.fromFile(await openAsBlob(path));
    try {
      const fields = tableFromIPC(file.schema().intoIPCStream()).schema.fields;
      const plain =
        fields.length === header.length &&
        fields.every((field, c) => field.name === header[c] && TEXT_TYPES.has(field.typeId));
      const large = fields.map((field) => field.typeId === Type.LargeUtf8 || field.typeId === Type.LargeBinary);
      const memory = () => (wasmMemory() as unknown as { buffer: ArrayBuffer }).buffer;
      if (plain) return new ArrowGroups(file, large, memory);
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
    )) as ReadableStream<RecordBatch>;
    const reader = stream.getReader();
    let line = firstLine;
    try {
      for (;;) {
        const next = await this.step(reader.read());
        if (next.done) break;
        const rows = next.value.numRows;
        yield* this.chunksOf(next.value, line, chunkRows);
        line += rows;
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

  /**
   * A batch's rows in chunks of `chunkRows`. Its columns are read where the decoder left them, through the Arrow C
   * data interface, and copied once, into the chunks' bytes: no copy of the batch is made to be thrown away, so
   * nothing waits outside the heap for a collection that little allocation on the heap would make rare.
   */
  private chunksOf(batch: RecordBatch, firstLine: number, chunkRows: number): Utf8Chunk[] {
    const ffi = batch.intoFFI();
    try {
      // read after the export: memory that grew since is a new buffer
      const memory = this.memory();
      const at = new DataView(memory);
      const array = ffi.arrayAddr();
      const rows = Number(at.getBigInt64(array, true));
      const width = Number(at.getBigInt64(array + STRUCT.nChildren, true));
      if (width !== this.large.length) throw new Error(`a batch of ${width} columns, not ${this.large.length}`);
      const children = at.getUint32(array + STRUCT.children, true);
      const columns = this.large.map((large, c) => columnOf(memory, at.getUint32(children + 4 * c, true), rows, large));
      const chunks: Utf8Chunk[] = [];
      for (let from = 0; from < rows; from += chunkRows) {
        const to = Math.min(rows, from + chunkRows);
        chunks.push({
          firstLine: firstLine + from,
          rows: to - from,
          columns: columns.map((column) => utf8ColumnOfRuns(column.values, column.offsets, column.valid, from, to)),
        });
      }
      return chunks;
    } finally {
      ffi.free();
    }
  }
}

/**
 * Where the fields of an ArrowArray (the Arrow C data interface) are, in the decoder's 32-bit memory: five 64-bit
 * integers, then pointers of 4 bytes.
 */
const STRUCT = { length: 0, nullCount: 8, offset: 16, nChildren: 32, buffers: 40, children: 44 } as const;

/** One string or bytes column of a batch, as views of the decoder's memory. */
interface ColumnView {
  values: Uint8Array;
  offsets: Int32Array | BigInt64Array;
  valid: ((row: number) => boolean) | undefined;
}

/** The column whose ArrowArray is at `array`: its buffers are validity, offsets and values. */
function columnOf(memory: ArrayBuffer, array: number, rows: number, large: boolean): ColumnView {
  const at = new DataView(memory);
  if (Number(at.getBigInt64(array + STRUCT.length, true)) !== rows) throw new Error('a column of another length');
  const first = Number(at.getBigInt64(array + STRUCT.offset, true));
  const nulls = Number(at.getBigInt64(array + STRUCT.nullCount, true));
  const buffers = at.getUint32(array + STRUCT.buffers, true);
  const validity = at.getUint32(buffers, true);
  const offsetsAt = at.getUint32(buffers + 4, true);
  // a misaligned buffer throws here, and the group is read the other way
  const offsets = large
    ? new BigInt64Array(memory, offsetsAt + 8 * first, rows + 1)
    : new Int32Array(memory, offsetsAt + 4 * first, rows + 1);
  const values = new Uint8Array(memory, at.getUint32(buffers + 8, true), Number(offsets[rows]));
  const bits = validity === 0 || nulls === 0 ? undefined : new Uint8Array(memory, validity);
  const valid =
    bits === undefined ? undefined : (row: number) => ((bits[(first + row) >> 3] >> ((first + row) & 7)) & 1) === 1;
  return { values, offsets, valid };
}
