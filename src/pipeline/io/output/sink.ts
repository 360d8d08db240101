import { unlink, type FileHandle } from 'node:fs/promises';
import { finished } from 'node:stream/promises';
import {
  packRows,
  rowEncoder,
  rowFormatOf,
  writesHeaderLine,
  type PackedRows,
  type RowEncoder,
  type RowFormat,
} from './row-encoders.js';
import { OutputError, type OpenSinkOptions, type PreparedOutput, type SealedOutput, type TableSink } from '../table.js';
import { WorkerPool } from '../../workers/worker-pool.js';
import { compiledScriptPresent } from '../../workers/compiled-script.js';
import { fileFailure, finalModeFor, openOutputTemp, preparedFile } from './output-file.js';
import { GzipMembers } from './gzip-members.js';
import { isS3Url } from '../s3/s3-url.js';

/**
 * Opens the output. A file is written to `.<name>.<pid>.tmp` beside the target (mode 0600: it holds input rows)
 * and renamed into place by commit(), so an interrupted or failed run never leaves a file that looks complete.
 * A symlinked path is written through to its target; temp files of earlier runs that were killed are removed.
 * stdout is written directly. CSV and JSONL are gzipped on the way when asked (or when the path ends in `.gz`);
 * Parquet has its own sink.
 */
export async function openSink(opts: OpenSinkOptions): Promise<TableSink> {
  // the Parquet writer is loaded only for a Parquet output
  // the S3 client is loaded only for an s3:// output; the rows reach it through a sink of this very kind
  // the key's `.gz` decides the compression as a file name does; Parquet judges a `.gz` name itself
  if (isS3Url(opts.path))
    return (await import('../s3/s3-sink.js')).openS3Sink(
      { ...opts, path: opts.path as string, ...(opts.format !== 'parquet' ? { compress: compressionOf(opts) } : {}) },
      openSink,
    );
  if (opts.format === 'parquet') return (await import('../parquet/parquet-sink.js')).openParquetSink(opts);
  const gzip = compressionOf(opts) === 'gzip';
  const format: RowFormat = rowFormatOf(opts.format, opts.header, opts.types);
  const encode = rowEncoder(format);
  const preamble =
    writesHeaderLine(format) && opts.header.length > 0 && opts.headerLine !== false
      ? `${opts.bom ? '\ufeff' : ''}${encode([opts.header])}`
      : '';
  const threads = compiledScriptPresent(ENCODE_WORKER) ? Math.max(0, Math.floor(opts.threads ?? 0)) : 0;
  const encoder: Encoder = threads > 0 ? new ThreadedEncoder(encode, format, threads) : { encode };
  const toStdout = opts.path === undefined || opts.path === '-';
  const sink = toStdout
    ? new StreamSink(opts.stream ?? process.stdout, encoder, opts.stream === undefined, gzip)
    : await FileSink.create(opts.path as string, encoder, opts.mode, gzip);
  if (preamble !== '') await sink.writeText(preamble);
  return sink;
}

/** 'gzip' or 'none' as asked, else by the path: `-o out.csv.gz` is gzipped. */
export function compressionOf(opts: Pick<OpenSinkOptions, 'path' | 'compress'>): 'gzip' | 'none' {
  if (opts.compress !== undefined) return opts.compress;
  return opts.path !== undefined && /\.gz$/i.test(opts.path) ? 'gzip' : 'none';
}

/** Compiled beside this module in dist/. */
const ENCODE_WORKER = new URL('./encode-thread-entry.js', import.meta.url);

interface Encoder {
  encode: RowEncoder;
  threaded?: ThreadedEncoder;
}

/** Chunks encoded ahead by the worker threads, at most, before writeRows waits for the oldest. */
const ENCODED_AHEAD_PER_THREAD = 2;

/**
 * Output encoding on worker threads (`--threads`): the CSV/JSONL text of a chunk is made off the main thread,
 * which meanwhile reads, prepares and maps the next chunks. Chunks are written in the order they were given.
 */
class ThreadedEncoder implements Encoder {
  private pool: WorkerPool<PackedRows, Uint8Array> | undefined;
  private readonly queue: { text: Promise<Uint8Array> }[] = [];

  constructor(
    readonly encode: RowEncoder,
    private readonly format: RowFormat,
    private readonly threads: number,
  ) {}

  get threaded(): ThreadedEncoder {
    return this;
  }

  /** Starts encoding rows; they are packed now, so the caller may change the arrays once this returns. */
  submit(rows: readonly (readonly string[])[]): void {
    // started on first use: a run that writes no rows starts no thread
    this.pool ??= new WorkerPool<PackedRows, Uint8Array>({
      script: ENCODE_WORKER,
      size: this.threads,
      workerData: this.format,
      purpose: 'output encoding',
    });
    const packed = packRows(rows);
    const text = this.pool.run(packed, [
      packed.cellLengths.buffer as ArrayBuffer,
      packed.rowWidths.buffer as ArrayBuffer,
    ]);
    // awaited in order later; until then a failure must not count as unhandled
    text.catch(() => undefined);
    this.queue.push({ text });
  }

  get backlog(): number {
    return this.queue.length;
  }

  get full(): boolean {
    return this.queue.length > ENCODED_AHEAD_PER_THREAD * this.threads;
  }

  /** The oldest chunk's text (waits for it), or undefined when nothing is queued. */
  async next(): Promise<Uint8Array | undefined> {
    const head = this.queue.shift();
    return head === undefined ? undefined : head.text;
  }

  async close(): Promise<void> {
    this.queue.length = 0;
    await this.pool?.close();
  }
}

abstract class SinkBase implements TableSink {
  protected failure: Error | undefined;
  protected finished = false;

  /**
   * `stream` takes the bytes; `downstream`, when there is a gzip in between, is where its output goes, and its
   * failures (a full disk, a closed pipe) are this sink's too.
   */
  constructor(
    protected readonly stream: NodeJS.WritableStream,
    private readonly encoder: Encoder,
    protected readonly downstream?: NodeJS.WritableStream,
  ) {
    stream.on('error', (err: Error) => this.onError(err));
    downstream?.on('error', (err: Error) => {
      this.onError(err);
      // the gzip would otherwise wait for ever for room downstream
      (stream as NodeJS.WritableStream & { destroy(error?: Error): void }).destroy(err);
    });
  }

  protected onError(err: Error): void {
    this.failure ??= err;
  }

  async writeRows(rows: string[][]): Promise<void> {
    if (rows.length === 0) return;
    const threaded = this.encoder.threaded;
    if (threaded === undefined) {
      await this.emit(this.encoder.encode(rows));
      return;
    }
    if (this.finished) throw new Error('write after the output was committed or aborted');
    if (this.failure) throw this.translate(this.failure);
    threaded.submit(rows);
    while (threaded.full) await this.emit((await threaded.next()) as Uint8Array);
  }

  /**
   * The bytes are the sink's from here on: once written, they go back to the writer (`written`) or their memory is
   * released (see releaseWhenWritten).
   */
  async writeEncoded(bytes: Uint8Array, written?: () => void): Promise<void> {
    await this.flushEncoded();
    await this.emit(
      bytes,
      written === undefined
        ? releaseWhenWritten(bytes)
        : (err) => {
            if (!err) written();
          },
    );
  }

  /** Text written as is (a header), after every chunk given before it. */
  async writeText(text: string): Promise<void> {
    await this.flushEncoded();
    await this.emit(text);
  }

  /** Writes what the worker threads still encode, in order; commit() calls it first. */
  protected async flushEncoded(): Promise<void> {
    const threaded = this.encoder.threaded;
    if (threaded === undefined) return;
    while (threaded.backlog > 0) await this.emit((await threaded.next()) as Uint8Array);
  }

  protected async stopEncoding(): Promise<void> {
    await this.encoder.threaded?.close();
  }

  private async emit(text: string | Uint8Array, written?: (err?: Error | null) => void): Promise<void> {
    if (this.finished) throw new Error('write after the output was committed or aborted');
    if (this.failure) throw this.translate(this.failure);
    if (this.skipWrites()) return;
    if (this.stream.write(text, written)) return;
    await this.drained();
  }

  /** Waits for 'drain' (backpressure), or for the stream to fail or be closed by abort(). */
  private async drained(): Promise<void> {
    await this.waitFor(['drain', 'close']);
    if (this.failure) throw this.translate(this.failure);
  }

  /** Resolves on the first of `events`; a stream error rejects unless errorOutcome() forgives it. */
  protected waitFor(events: string[]): Promise<void> {
    const emitter = this.stream as NodeJS.EventEmitter;
    return new Promise((resolve, reject) => {
      const settle = (err?: Error) => {
        for (const e of events) emitter.off(e, onEvent);
        emitter.off('error', onError);
        if (err) reject(err);
        else resolve();
      };
      const onEvent = () => settle();
      const onError = (err: Error) => settle(this.errorOutcome(err));
      for (const e of events) emitter.on(e, onEvent);
      emitter.on('error', onError);
    });
  }

  /** The error to fail with, or undefined when the error just means "stop writing". */
  protected errorOutcome(err: Error): Error | undefined {
    return this.translate(err);
  }

  protected skipWrites(): boolean {
    return false;
  }

  protected abstract translate(err: Error): Error;
  abstract commit(sealed?: (file: SealedOutput) => void | Promise<void>): Promise<void>;
  abstract abort(): Promise<void>;
}

/** stdout (or a stream given by a caller). A reader that went away (EPIPE, as in `| head`) is not an error. */
class StreamSink extends SinkBase {
  private readerGone = false;

  private readonly gzip: GzipMembers | undefined;

  constructor(
    target: NodeJS.WritableStream,
    encoder: Encoder,
    private readonly isProcessStdout: boolean,
    gzip = false,
  ) {
    const gz = gzip ? new GzipMembers() : undefined;
    // process.stdout must never be ended, so the gzip does not end it either
    if (gz !== undefined) gz.pipe(target, { end: !isProcessStdout });
    super(gz ?? target, encoder, gz === undefined ? undefined : target);
    this.gzip = gz;
  }

  protected override onError(err: Error): void {
    if ((err as NodeJS.ErrnoException).code === 'EPIPE') this.readerGone = true;
    else super.onError(err);
  }

  protected override errorOutcome(err: Error): Error | undefined {
    // a closed pipe ends the wait as if drained: later writes are skipped
    return (err as NodeJS.ErrnoException).code === 'EPIPE' ? undefined : this.translate(err);
  }

  protected override skipWrites(): boolean {
    return this.readerGone;
  }

  protected translate(err: Error): Error {
    // a caller's stream that names itself (an upload to S3) says what failed in its own words
    if (err instanceof OutputError) return err;
    const code = (err as NodeJS.ErrnoException).code;
    return new OutputError('<stdout>', `write failed (${code ?? err.message})`);
  }

  async commit(): Promise<void> {
    if (this.finished) return;
    try {
      await this.flushEncoded();
    } finally {
      await this.stopEncoding();
    }
    this.finished = true;
    if (this.failure) throw this.translate(this.failure);
    if (this.readerGone) return;
    if (this.gzip !== undefined) {
      const target = this.downstream as NodeJS.WritableStream;
      this.gzip.end();
      // all compressed bytes handed on, then (for a caller's stream) written
      await (this.isProcessStdout ? finished(this.gzip) : finished(target));
      if (this.failure) throw this.translate(this.failure);
      if (!this.isProcessStdout) return;
    }
    // process.stdout must not be ended (Node keeps it open for later writes); waiting for 'drain' flushes it
    if (this.isProcessStdout) {
      const s = (this.downstream ?? this.stream) as NodeJS.WritableStream & { writableNeedDrain?: boolean };
      if (s.writableNeedDrain)
        await new Promise<void>((resolve) => {
          s.once('drain', resolve);
          s.once('close', resolve);
        });
      return;
    }
    this.stream.end();
    await this.waitFor(['finish', 'close']);
  }

  async abort(): Promise<void> {
    // what was written to a pipe cannot be taken back; the exit code tells the reader it is incomplete
    this.finished = true;
    await this.stopEncoding();
  }
}

class FileSink extends SinkBase {
  private constructor(
    /** The path as the user gave it: what messages name. */
    private readonly shown: string,
    /** Where the rename goes: the path, or its symlink's target. */
    private readonly target: string,
    private readonly tmp: string,
    private readonly handle: FileHandle,
    private readonly file: NodeJS.WritableStream,
    encoder: Encoder,
    private readonly mode: number,
    gzip: GzipMembers | undefined,
  ) {
    super(gzip ?? file, encoder, gzip === undefined ? undefined : file);
  }

  static async create(path: string, encoder: Encoder, mode = 0o666, gzip = false): Promise<FileSink> {
    const { target, tmp, handle } = await openOutputTemp(path);
    const file = handle.createWriteStream({ autoClose: false, highWaterMark: 1024 * 1024 });
    const gz = gzip ? new GzipMembers() : undefined;
    gz?.pipe(file);
    return new FileSink(path, target, tmp, handle, file, encoder, mode, gz);
  }

  protected translate(err: Error): Error {
    return err instanceof OutputError ? err : fileFailure(this.shown, err);
  }

  async commit(sealed?: (file: SealedOutput) => void | Promise<void>): Promise<void> {
    await (await this.prepareCommit()).publish(sealed);
  }

  async prepareCommit(): Promise<PreparedOutput> {
    if (this.finished) throw new Error('commit after the output was committed or aborted');
    try {
      await this.flushEncoded();
    } catch (err) {
      await this.abort();
      throw this.translate(err as Error);
    } finally {
      await this.stopEncoding();
    }
    this.finished = true;
    try {
      if (this.failure) throw this.failure;
      this.stream.end();
      // with a gzip in between, its last bytes reach the file after the gzip itself has finished
      await finished(this.file);
      if (this.failure) throw this.failure;
      // fsync before rename: after a crash the target is either the old file or the complete new one
      await this.handle.sync();
      await this.handle.chmod(finalModeFor(this.target, this.mode));
      // a stream made from a FileHandle holds a reference to it: close() would wait for ever without this
      (this.file as NodeJS.WritableStream & { destroy(): void }).destroy();
      await this.handle.close();
    } catch (err) {
      await this.discard();
      throw this.translate(err as Error);
    }
    return preparedFile(this.shown, this.tmp, this.target);
  }

  async abort(): Promise<void> {
    await this.stopEncoding();
    if (this.finished) return;
    this.finished = true;
    await this.discard();
  }

  private async discard(): Promise<void> {
    (this.stream as NodeJS.WritableStream & { destroy(): void }).destroy();
    (this.file as NodeJS.WritableStream & { destroy(): void }).destroy();
    await this.handle.close().catch(() => undefined);
    await unlink(this.tmp).catch(() => undefined);
  }
}

/**
 * Encoded rows come from worker threads as buffers of about 1 MB that outlive a few scavenges on their way to the
 * disk, so they die in the old generation, which the main thread collects rarely: up to ~60 MB of written output
 * stayed allocated (peak RSS grew from 1M to 5M rows). Once the stream has written them, moving their memory into
 * a throwaway ArrayBuffer (a transfer, no copy) lets the next scavenge free it.
 */
function releaseWhenWritten(bytes: Uint8Array): (err?: Error | null) => void {
  return (err) => {
    const buffer = bytes.buffer;
    if (err || !(buffer instanceof ArrayBuffer) || buffer.byteLength === 0) return;
    structuredClone(buffer, { transfer: [buffer] });
  };
}
