/** Writes the output table as a Parquet file, one row group at a time, with typed result columns. */
import type { ParquetEncodeTask } from './parquet-encode-thread-entry.js';
import { ParquetCellError } from './parquet-cell-error.js';
import type { ParquetEncoder, ParquetLayout } from './parquet-encoder.js';
import { type ByteTarget, openFileTarget } from './byte-target.js';
import { blockRowCount, utf8RowBlock } from '../row-blocks.js';
import { OutputError, type OpenSinkOptions, type PreparedOutput, type SealedOutput, type TableSink } from '../table.js';
import type { ColumnType } from '../typed-cells.js';
import { WorkerPool, type ThrownInWorker } from '../../workers/worker-pool.js';
import { compiledScriptPresent } from '../../workers/compiled-script.js';

/**
 * Rows held before they are written as one row group. The writer holds a group's encoded pages in its
 * WebAssembly memory until the group ends, and that memory never shrinks, so this bounds the writer's memory;
 * bigger groups compress a little better (one dictionary per column per group) and cost readers less per row,
 * smaller ones bound memory tighter. See bench/formats.mjs.
 */
export const PARQUET_ROW_GROUP_ROWS = 20_000;

/**
 * Parquet output, typed by the column types (see parquet-encoder.ts). With `threads` > 0 the row groups are
 * encoded on a worker thread while this thread goes on mapping; the file is the same byte for byte. Like the CSV
 * sink, the file is written beside the target and renamed into place only by commit(). `openTarget`, when given,
 * takes the bytes instead of a file at `opts.path` (an s3:// output's upload); the path still names the output.
 */
export async function openParquetSink(
  opts: OpenSinkOptions,
  rowGroupRows = PARQUET_ROW_GROUP_ROWS,
  openTarget?: () => Promise<ByteTarget>,
): Promise<TableSink> {
  if (opts.path === undefined || opts.path === '-') {
    throw new OutputError(
      '<stdout>',
      'Parquet cannot be written to stdout (its index is written at the end of the file)',
      'give a file name with -o, e.g. -o out.parquet',
    );
  }
  if (opts.compress === 'gzip') {
    throw new OutputError(
      opts.path,
      'Parquet is not gzipped as a whole (it compresses its own pages)',
      'drop --compress gzip, or write CSV or JSONL',
    );
  }
  if (opts.compress === undefined && /\.gz$/i.test(opts.path)) {
    throw new OutputError(
      opts.path,
      'a Parquet file is not gzipped as a whole (it compresses its own pages), so it should not be named .gz',
      'name it .parquet, or write CSV or JSONL to a .gz name',
    );
  }
  const types = opts.types ?? [];
  if (types.length > opts.header.length) throw new Error('more column types than columns');
  const layout: ParquetLayout = {
    header: opts.header,
    types: opts.header.map((_, i): ColumnType => types[i] ?? 'input'),
    rowGroupRows: Math.max(1, rowGroupRows),
  };
  const threaded = (opts.threads ?? 0) > 0 && compiledScriptPresent(ENCODE_WORKER);
  // the Parquet writer (WebAssembly) is loaded on this thread only to encode here: a thread may encode instead
  const encoding: Encoding = threaded
    ? new ThreadedEncoding(layout)
    : new InlineEncoding(new (await import('./parquet-encoder.js')).ParquetEncoder(layout));
  let target: ByteTarget;
  try {
    target = await (openTarget?.() ?? openFileTarget(opts.path, opts.mode ?? 0o666));
  } catch (err) {
    await encoding.close();
    throw err;
  }
  return new ParquetSink(target, encoding, layout);
}

/**
 * V8 heap limits of the encoding thread. Its rows wait as bytes outside the heap, so what the heap holds is one
 * column's values at a time; a smaller young generation costs more scavenging, a larger one more memory (see
 * bench/formats.mjs).
 */
const ENCODE_THREAD_LIMITS = { maxYoungGenerationSizeMb: 32, maxOldGenerationSizeMb: 256 };

/** Compiled beside this module in dist/. */
const ENCODE_WORKER = new URL('./parquet-encode-thread-entry.js', import.meta.url);

/** Rows to bytes, in order: on this thread, or on a worker thread. */
interface Encoding {
  /** Takes rows; the caller may change the arrays once this is called. */
  add(rows: readonly (readonly string[])[]): Promise<void>;
  /** Takes a block of rows made by utf8RowBlock(); the block is the encoding's from here on. */
  addBlock(block: Uint8Array): Promise<void>;
  /** Whether more rows are waiting to be encoded than writeRows should let pile up. */
  readonly full: boolean;
  /** The oldest bytes not yet taken (waits for them), or undefined when nothing is waiting. */
  next(): Promise<Uint8Array | undefined>;
  /** Whether next() would answer without waiting. */
  readonly ready: boolean;
  /** Ends the file: its remaining bytes (after every earlier next()). */
  finish(): Promise<Uint8Array>;
  close(): Promise<void>;
}

class InlineEncoding implements Encoding {
  private encoded: Uint8Array[] = [];
  readonly full = false;

  constructor(private readonly encoder: ParquetEncoder) {}

  async add(rows: readonly (readonly string[])[]): Promise<void> {
    const bytes = await this.encoder.addRows(rows);
    if (bytes.length > 0) this.encoded.push(bytes);
  }

  async addBlock(block: Uint8Array): Promise<void> {
    const bytes = await this.encoder.addBlock(block);
    if (bytes.length > 0) this.encoded.push(bytes);
  }

  get ready(): boolean {
    return this.encoded.length > 0;
  }

  async next(): Promise<Uint8Array | undefined> {
    return this.encoded.shift();
  }

  async finish(): Promise<Uint8Array> {
    return this.encoder.finish();
  }

  async close(): Promise<void> {
    this.encoded = [];
  }
}

/**
 * The row groups encoded on one worker thread, which holds the file's encoder: rows are made into blocks and sent
 * as they come; while the thread encodes a full group, up to another group's worth of rows may wait for it (about
 * one group's memory more, so that mapping does not stop while a group is encoded).
 */
class ThreadedEncoding implements Encoding {
  private started: WorkerPool<ParquetEncodeTask, Uint8Array> | undefined;
  private readonly queue: { rows: number; bytes: Promise<Uint8Array>; settled: boolean }[] = [];
  private waitingRows = 0;

  constructor(private readonly layout: ParquetLayout) {}

  /** The thread starts with the first rows: a file that another thread encodes (encodeElsewhere) needs none. */
  private get pool(): WorkerPool<ParquetEncodeTask, Uint8Array> {
    this.started ??= new WorkerPool<ParquetEncodeTask, Uint8Array>({
      script: ENCODE_WORKER,
      size: 1,
      workerData: this.layout,
      purpose: 'Parquet encoding',
      revive: reviveCellError,
      resourceLimits: ENCODE_THREAD_LIMITS,
    });
    return this.started;
  }

  async add(rows: readonly (readonly string[])[]): Promise<void> {
    const block = utf8RowBlock(rows, this.layout.header.length);
    this.submit(this.pool.runOn(0, { block }, [block.buffer as ArrayBuffer]), rows.length);
  }

  async addBlock(block: Uint8Array): Promise<void> {
    // a block that is a view of a bigger buffer is copied: handing the buffer over would empty it for its owner
    const own = block.byteOffset === 0 && block.byteLength === block.buffer.byteLength ? block : block.slice();
    const rows = blockRowCount(own);
    this.submit(this.pool.runOn(0, { block: own }, [own.buffer as ArrayBuffer]), rows);
  }

  private submit(bytes: Promise<Uint8Array>, rows: number): void {
    const entry = { rows, bytes, settled: false };
    // awaited in order later; until then a failure must not count as unhandled
    bytes.then(
      () => (entry.settled = true),
      () => (entry.settled = true),
    );
    this.queue.push(entry);
    this.waitingRows += rows;
  }

  get ready(): boolean {
    return this.queue[0]?.settled === true;
  }

  get full(): boolean {
    return this.waitingRows > this.layout.rowGroupRows;
  }

  async next(): Promise<Uint8Array | undefined> {
    const head = this.queue.shift();
    if (head === undefined) return undefined;
    this.waitingRows -= head.rows;
    return head.bytes;
  }

  finish(): Promise<Uint8Array> {
    return this.pool.runOn(0, { end: true });
  }

  async close(): Promise<void> {
    this.queue.length = 0;
    await this.started?.close();
  }
}

/**
 * The file's bytes made by another thread (the one that holds the rows): written as they come; the last ones
 * are given by endFile().
 */
class EncodedElsewhere implements Encoding {
  private encoded: Uint8Array[] = [];
  private tail: Uint8Array | undefined;
  readonly full = false;

  async add(): Promise<void> {
    throw new Error('rows given to a Parquet output that another thread encodes');
  }

  async addBlock(bytes: Uint8Array): Promise<void> {
    if (this.tail !== undefined) throw new Error('Parquet bytes given after the end of the file');
    this.encoded.push(bytes);
  }

  end(tail: Uint8Array): void {
    this.tail = tail;
  }

  get ready(): boolean {
    return this.encoded.length > 0;
  }

  async next(): Promise<Uint8Array | undefined> {
    return this.encoded.shift();
  }

  async finish(): Promise<Uint8Array> {
    if (this.tail === undefined) throw new Error('a Parquet output committed without the end of its file');
    return this.tail;
  }

  async close(): Promise<void> {
    this.encoded = [];
  }
}

function reviveCellError(thrown: ThrownInWorker): Error | undefined {
  if (thrown.name !== 'ParquetCellError') return undefined;
  return new ParquetCellError(String(thrown.fields.column), String(thrown.fields.expected));
}

class ParquetSink implements TableSink {
  private finished = false;
  private given = false;

  constructor(
    private readonly target: ByteTarget,
    private encoding: Encoding,
    private readonly layout: ParquetLayout,
  ) {}

  encodeElsewhere(): ParquetLayout | undefined {
    if (this.given || this.finished) return undefined;
    const before = this.encoding;
    this.encoding = new EncodedElsewhere();
    void before.close();
    return this.layout;
  }

  endFile(tail: Uint8Array): void {
    if (!(this.encoding instanceof EncodedElsewhere)) throw new Error('endFile() without encodeElsewhere()');
    this.encoding.end(tail);
  }

  async writeRows(rows: string[][]): Promise<void> {
    if (rows.length === 0 && !this.finished) return;
    await this.give(() => this.encoding.add(rows));
  }

  /** Rows already made into a block by utf8RowBlock() (on a thread that kept them), after the rows before. */
  async writeEncoded(block: Uint8Array): Promise<void> {
    await this.give(() => this.encoding.addBlock(block));
  }

  /** Hands rows to the encoding, then writes the bytes already encoded. */
  private async give(add: () => Promise<void>): Promise<void> {
    if (this.finished) throw new Error('write after the output was committed or aborted');
    this.given = true;
    try {
      await add();
      // bytes already encoded are written as this thread comes by; it waits only when too many rows are waiting
      while (this.encoding.full || this.encoding.ready) await this.writeNext();
    } catch (err) {
      throw this.translate(err);
    }
  }

  async commit(sealed?: (file: SealedOutput) => void | Promise<void>): Promise<void> {
    await (await this.prepareCommit()).publish(sealed);
  }

  async prepareCommit(): Promise<PreparedOutput> {
    if (this.finished) throw new Error('commit after the output was committed or aborted');
    this.finished = true;
    try {
      while (await this.writeNext()) {}
      await this.target.write(await this.encoding.finish());
      await this.encoding.close();
      return await this.target.prepare();
    } catch (err) {
      await this.discard();
      throw this.translate(err);
    }
  }

  async abort(): Promise<void> {
    if (this.finished) return;
    this.finished = true;
    await this.discard();
  }

  /** Writes the oldest encoded bytes; false when there were none. */
  private async writeNext(): Promise<boolean> {
    const bytes = await this.encoding.next();
    if (bytes === undefined) return false;
    if (bytes.length > 0) await this.target.write(bytes);
    return true;
  }

  private translate(err: unknown): Error {
    if (err instanceof OutputError) return err;
    if (err instanceof ParquetCellError)
      return new OutputError(this.target.name, err.message, 'this is a bug: please report it');
    return this.target.failure(err as Error);
  }

  private async discard(): Promise<void> {
    await this.encoding.close().catch(() => undefined);
    await this.target.discard();
  }
}
