import { open, rename, unlink, type FileHandle } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { stringify } from 'csv-stringify/sync';
import { OutputError, type OpenSinkOptions, type TableSink } from './table.js';

/**
 * Opens the output. A file is written to `.<name>.<pid>.tmp` beside the target and renamed into place by
 * commit(), so an interrupted or failed run never leaves a file that looks complete. stdout is written directly.
 */
export async function openSink(opts: OpenSinkOptions): Promise<TableSink> {
  const encode = opts.format === 'jsonl' ? jsonlEncoder(opts.header) : csvEncoder();
  const preamble = opts.format === 'csv' && opts.header.length > 0 ? `${opts.bom ? '\ufeff' : ''}${encode([opts.header])}` : '';
  const toStdout = opts.path === undefined || opts.path === '-';
  const sink = toStdout
    ? new StreamSink(opts.stream ?? process.stdout, encode, opts.stream === undefined)
    : await FileSink.create(opts.path as string, encode, opts.mode);
  if (preamble !== '') await sink.writeText(preamble);
  return sink;
}

type Encoder = (rows: string[][]) => string;

/** One csv-stringify/sync call per chunk: measured about 2.5x faster than the streaming stringifier. */
function csvEncoder(): Encoder {
  return (rows) => stringify(rows, { eof: true, record_delimiter: '\n' });
}

/** Each row as one JSON object keyed by the header; the keys are encoded once, not per row. */
function jsonlEncoder(header: string[]): Encoder {
  const keys = header.map((name, i) => `${i === 0 ? '{' : ','}${JSON.stringify(name)}:`);
  return (rows) => {
    let out = '';
    for (const row of rows) {
      if (keys.length === 0) {
        out += '{}\n';
        continue;
      }
      for (let i = 0; i < keys.length; i++) out += keys[i] + JSON.stringify(row[i] ?? '');
      out += '}\n';
    }
    return out;
  };
}

abstract class SinkBase implements TableSink {
  protected failure: Error | undefined;
  protected finished = false;

  constructor(
    protected readonly stream: NodeJS.WritableStream,
    private readonly encode: Encoder,
  ) {
    stream.on('error', (err: Error) => this.onError(err));
  }

  protected onError(err: Error): void {
    this.failure ??= err;
  }

  async writeRows(rows: string[][]): Promise<void> {
    if (rows.length === 0) return;
    await this.writeText(this.encode(rows));
  }

  async writeText(text: string): Promise<void> {
    if (this.finished) throw new Error('write after the output was committed or aborted');
    if (this.failure) throw this.translate(this.failure);
    if (this.skipWrites()) return;
    if (this.stream.write(text)) return;
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
  abstract commit(): Promise<void>;
  abstract abort(): Promise<void>;
}

/** stdout (or a stream given by a caller). A reader that went away (EPIPE, as in `| head`) is not an error. */
class StreamSink extends SinkBase {
  private readerGone = false;

  constructor(
    stream: NodeJS.WritableStream,
    encode: Encoder,
    private readonly isProcessStdout: boolean,
  ) {
    super(stream, encode);
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
    const code = (err as NodeJS.ErrnoException).code;
    return new OutputError('<stdout>', `write failed (${code ?? err.message})`);
  }

  async commit(): Promise<void> {
    if (this.finished) return;
    this.finished = true;
    if (this.failure) throw this.translate(this.failure);
    if (this.readerGone) return;
    // process.stdout must not be ended (Node keeps it open for later writes); waiting for 'drain' flushes it
    if (this.isProcessStdout) {
      const s = this.stream as NodeJS.WritableStream & { writableNeedDrain?: boolean };
      if (s.writableNeedDrain) await this.waitFor(['drain', 'close']);
      return;
    }
    this.stream.end();
    await this.waitFor(['finish', 'close']);
  }

  async abort(): Promise<void> {
    // what was written to a pipe cannot be taken back; the exit code tells the reader it is incomplete
    this.finished = true;
  }
}

class FileSink extends SinkBase {
  private constructor(
    private readonly target: string,
    private readonly tmp: string,
    private readonly handle: FileHandle,
    stream: NodeJS.WritableStream,
    encode: Encoder,
  ) {
    super(stream, encode);
  }

  static async create(target: string, encode: Encoder, mode = 0o666): Promise<FileSink> {
    const tmp = join(dirname(target), `.${basename(target)}.${process.pid}.tmp`);
    let handle: FileHandle;
    try {
      handle = await open(tmp, 'w', mode);
    } catch (err) {
      throw fileFailure(target, err as Error);
    }
    const stream = handle.createWriteStream({ autoClose: false, highWaterMark: 1024 * 1024 });
    return new FileSink(target, tmp, handle, stream, encode);
  }

  protected translate(err: Error): Error {
    return err instanceof OutputError ? err : fileFailure(this.target, err);
  }

  async commit(): Promise<void> {
    if (this.finished) throw new Error('commit after the output was committed or aborted');
    this.finished = true;
    try {
      if (this.failure) throw this.failure;
      this.stream.end();
      await this.waitFor(['finish']);
      // fsync before rename: after a crash the target is either the old file or the complete new one
      await this.handle.sync();
      // a stream made from a FileHandle holds a reference to it: close() would wait for ever without this
      (this.stream as NodeJS.WritableStream & { destroy(): void }).destroy();
      await this.handle.close();
      await rename(this.tmp, this.target);
      await syncDirectory(dirname(this.target));
    } catch (err) {
      await this.discard();
      throw this.translate(err as Error);
    }
  }

  async abort(): Promise<void> {
    if (this.finished) return;
    this.finished = true;
    await this.discard();
  }

  private async discard(): Promise<void> {
    (this.stream as NodeJS.WritableStream & { destroy(): void }).destroy();
    await this.handle.close().catch(() => undefined);
    await unlink(this.tmp).catch(() => undefined);
  }
}

/** Makes the rename itself durable; not possible on every platform (Windows), so best effort. */
async function syncDirectory(dir: string): Promise<void> {
  let handle: FileHandle | undefined;
  try {
    handle = await open(dir, 'r');
    await handle.sync();
  } catch {
    // the data is already synced; only the directory entry's durability is at stake
  } finally {
    await handle?.close().catch(() => undefined);
  }
}

function fileFailure(target: string, err: Error): OutputError {
  const code = (err as NodeJS.ErrnoException).code;
  switch (code) {
    case 'ENOENT':
      return new OutputError(target, 'the directory does not exist', 'create it first or choose another -o path');
    case 'EACCES':
    case 'EPERM':
      return new OutputError(target, 'permission denied', 'choose a directory you can write to');
    case 'ENOSPC':
      return new OutputError(target, 'the disk is full', 'free some space and run the same command again');
    case 'EISDIR':
      return new OutputError(target, 'is a directory', 'give a file name with -o');
    default:
      return new OutputError(target, `cannot be written (${code ?? err.message})`);
  }
}
