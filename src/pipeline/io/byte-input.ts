/** The checked bytes of a CSV or JSONL input (a file, a pipe or stdin, maybe gzipped), read after read. */
import { isUtf8 } from 'node:buffer';
import { constants as fsConstants, open as openFd } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { Socket } from 'node:net';
import { promisify } from 'node:util';
import { badBytesIn, firstInvalidUtf8, invalidUtf8, type BadByte } from './bad-records.js';
import { asBuffer, gunzipReads, gzipFailure } from './gzip.js';
import { LineIndex } from './line-index.js';
import { isS3Url } from './s3/s3-url.js';
import { openFailure, InputError, readInterrupted, type OpenSourceOptions } from './table.js';

const READ_CHUNK_BYTES = 64 * 1024;

/**
 * The raw bytes of the input, checked before any parser sees them: things that would otherwise turn into
 * silent garbage (invalid UTF-8 becomes U+FFFD, a NUL means a binary or UTF-16 file) stop the run with the
 * line they are on. A multi-byte character split across reads is carried to the next read. A gzip input (by
 * its first bytes, whatever its name, also on stdin) is decompressed as it streams; lines count the text.
 */
export class ByteInput {
  readonly lines = new LineIndex();
  /** Bytes handed to the parser so far (after the BOM). */
  private offset = 0;
  /** Bytes read from the file or pipe (compressed ones for gzip), for progress against totalBytes. */
  private consumed = 0;
  private carry: Buffer | undefined;
  private first = true;
  private done = false;
  private gunzipping = false;
  /** Skip mode: bad bytes are handed on with the read they are in (next().bad), not thrown. */
  skipBadBytes = false;

  private constructor(
    readonly name: string,
    readonly totalBytes: number | undefined,
    private readonly stream: NodeJS.ReadableStream,
    private iterator: AsyncIterator<Buffer | string>,
    private readonly validateUtf8: boolean,
    private readonly ownsStream: boolean,
    private readonly signal?: AbortSignal,
  ) {
    // a read that waits for data (a pipe nobody writes to yet) is given up when the run is interrupted
    if (signal !== undefined && ownsStream) {
      const onAbort = (): void => {
        (stream as NodeJS.ReadableStream & { destroy?: (err?: Error) => void }).destroy?.(readInterrupted());
      };
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
      stream.once('close', () => signal.removeEventListener('abort', onAbort));
    }
  }

  static async open(opts: Pick<OpenSourceOptions, 'path' | 'stream' | 'encoding' | 'signal'>): Promise<ByteInput> {
    const isStdin = opts.path === '-';
    const name = isStdin ? '<stdin>' : opts.path;
    const validate = opts.encoding === 'utf8';
    if (opts.stream) {
      return new ByteInput(name, undefined, opts.stream, opts.stream[Symbol.asyncIterator](), validate, false);
    }
    if (isStdin) {
      return new ByteInput(name, undefined, process.stdin, process.stdin[Symbol.asyncIterator](), validate, false);
    }
    if (isS3Url(opts.path)) {
      // the S3 client is loaded only for an s3:// input: commands that never read one start without it
      const { stream, size } = await (await import('./s3/s3-read.js')).openS3Object(opts.path);
      return new ByteInput(name, size, stream, stream[Symbol.asyncIterator](), validate, true, opts.signal);
    }
    let size: number;
    let fifo: boolean;
    try {
      const st = await stat(opts.path);
      if (st.isDirectory()) throw new InputError(name, undefined, 'a directory, not a file');
      size = st.size;
      fifo = st.isFIFO();
    } catch (err) {
      throw openFailure(name, err);
    }
    if (fifo) return ByteInput.openFifo(opts.path, name, validate, opts.signal);
    let handle: Awaited<ReturnType<typeof open>>;
    try {
      handle = await open(opts.path, 'r');
    } catch (err) {
      throw openFailure(name, err);
    }
    const stream = handle.createReadStream({ highWaterMark: READ_CHUNK_BYTES });
    // no signal: a regular file never waits for a writer, and a run stopped by one ends at the engine's pace (the
    // batches in flight are kept), not by a read torn down under it
    return new ByteInput(name, size, stream, stream[Symbol.asyncIterator](), validate, true);
  }

  /**
   * A named pipe is opened without waiting for a writer and read through the event loop, as stdin is. A plain
   * open() or read() of a pipe nobody writes to blocks a thread of libuv's pool, and a process whose pool thread
   * is blocked cannot exit: no signal would end the run. The stream waits for a writer and ends when the last
   * one closes, as a blocking read would.
   */
  private static async openFifo(
    path: string,
    name: string,
    validate: boolean,
    signal: AbortSignal | undefined,
  ): Promise<ByteInput> {
    let fd: number;
    try {
      // a plain descriptor, not a FileHandle: the socket owns and closes it (a FileHandle would close it when collected)
      fd = await promisify(openFd)(path, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK);
    } catch (err) {
      throw openFailure(name, err);
    }
    const stream = new Socket({ fd, readable: true, writable: false });
    return new ByteInput(name, undefined, stream, stream[Symbol.asyncIterator](), validate, true, signal);
  }

  bytesRead(): number {
    return this.consumed;
  }

  /** Whether the input turned out to be gzip-compressed (known after the first read). */
  get compressed(): boolean {
    return this.gunzipping;
  }

  /**
   * The next checked chunk and its offset, or null at the end. Throws InputError on bad bytes; with skipBadBytes,
   * hands them on in `bad` instead (the first of each line, by offset).
   */
  async next(): Promise<{ buf: Buffer; start: number; bad?: BadByte[] } | null> {
    for (;;) {
      let buf = await this.readRaw();
      if (buf === null) {
        if (this.carry !== undefined) {
          const start = this.offset;
          const buf = this.carry;
          this.lines.add(buf, start);
          this.carry = undefined;
          if (this.skipBadBytes) {
            this.offset += buf.length;
            return { buf, start, bad: [invalidUtf8(start, 'ends in the middle of a UTF-8 character')] };
          }
          throw this.badBytes(
            start,
            'ends in the middle of a UTF-8 character',
            'if the file is Latin-1 / Windows-1252, add --encoding latin1',
          );
        }
        return null;
      }
      if (this.carry !== undefined) {
        buf = Buffer.concat([this.carry, buf]);
        this.carry = undefined;
      }
      if (this.validateUtf8) {
        const cut = incompleteTailStart(buf);
        if (cut < buf.length) {
          this.carry = Buffer.from(buf.subarray(cut));
          buf = buf.subarray(0, cut);
        }
      }
      if (buf.length === 0) continue;
      const start = this.offset;
      this.offset += buf.length;
      this.lines.add(buf, start);
      if (this.skipBadBytes) {
        const bad = badBytesIn(buf, start, this.validateUtf8, this.gunzipping);
        return bad.length > 0 ? { buf, start, bad } : { buf, start };
      }
      const nul = buf.indexOf(0);
      if (nul !== -1) {
        throw this.badBytes(
          start + nul,
          this.gunzipping
            ? 'NUL byte in the decompressed data (a gzip of a binary file, not of text?)'
            : 'NUL byte (a binary or UTF-16 file?)',
          'save it as UTF-8 text (in Excel: "CSV UTF-8")',
        );
      }
      if (this.validateUtf8 && !isUtf8(buf)) {
        throw this.badBytes(
          start + firstInvalidUtf8(buf),
          'invalid UTF-8',
          'if the file is Latin-1 / Windows-1252, add --encoding latin1',
        );
      }
      return { buf, start };
    }
  }

  /** One read from the current iterator (the file, or the gunzip after it); gzip failures become InputErrors. */
  private async pull(): Promise<Buffer | null> {
    let r: IteratorResult<Buffer | string>;
    try {
      r = await this.iterator.next();
    } catch (err) {
      if (this.signal?.aborted === true) throw readInterrupted();
      if (this.gunzipping) throw gzipFailure(this.name, err);
      throw err;
    }
    if (r.done) return null;
    const buf = asBuffer(r.value);
    if (!this.gunzipping) this.consumed += buf.length;
    return buf;
  }

  /** The next read as it came (decompressed for gzip), after the file signature check and without a UTF-8 BOM. */
  private async readRaw(): Promise<Buffer | null> {
    if (this.done) return null;
    let buf = await this.pull();
    if (buf === null) {
      this.done = true;
      return null;
    }
    if (!this.first) return buf;
    this.first = false;
    buf = await this.atLeast(buf, 4);
    if (buf.length >= 2 && buf[0] === 0x1f && buf[1] === 0x8b) {
      this.startGunzip(buf);
      const text = await this.pull();
      if (text === null) {
        this.done = true;
        return null;
      }
      buf = await this.atLeast(text, 4);
    } else if (/\.gz$/i.test(this.name) && buf.length > 0) {
      throw new InputError(
        this.name,
        undefined,
        'named .gz but not gzip-compressed',
        'rename it without .gz, or check how it was exported',
      );
    }
    this.checkSignature(buf);
    return buf[0] === 0xef && buf[1] === 0xbb && buf[2] === 0xbf ? buf.subarray(3) : buf;
  }

  /** `buf` with more reads appended until it has `n` bytes or the input ends (a pipe may deliver fewer). */
  private async atLeast(buf: Buffer, n: number): Promise<Buffer> {
    while (buf.length < n) {
      const extra = await this.pull();
      if (extra === null) {
        this.done = true;
        break;
      }
      buf = Buffer.concat([buf, extra]);
    }
    return buf;
  }

  /** From here on reads come out of a gunzip fed with `head` and the rest of the input. */
  private startGunzip(head: Buffer): void {
    this.iterator = gunzipReads(
      head,
      this.iterator,
      (n) => {
        this.consumed += n;
      },
      READ_CHUNK_BYTES,
    );
    this.gunzipping = true;
  }

  close(): void {
    // ending the gunzip's iterator destroys it, and through the pipeline the file's stream
    if (this.gunzipping) Promise.resolve(this.iterator.return?.()).catch(() => undefined);
    if (!this.ownsStream) return;
    const destroyable = this.stream as NodeJS.ReadableStream & { destroy?: () => void };
    destroyable.destroy?.();
  }

  private badBytes(offset: number, problem: string, hint?: string): InputError {
    return new InputError(this.name, this.lines.lineAt(offset), problem, hint);
  }

  private checkSignature(buf: Buffer): void {
    const sig = (bytes: number[]) => bytes.every((b, i) => buf[i] === b);
    const what = this.gunzipping ? 'a gzip of ' : '';
    if (sig([0xff, 0xfe]) || sig([0xfe, 0xff])) {
      throw new InputError(
        this.name,
        1,
        `${this.gunzipping ? 'a gzip of a ' : ''}UTF-16 encoded${this.gunzipping ? ' file' : ''}`,
        'save it as UTF-8 (in Excel: "CSV UTF-8")',
      );
    }
    if (sig([0x50, 0x4b, 0x03, 0x04])) {
      throw new InputError(
        this.name,
        undefined,
        `${what}a ZIP archive (an Excel .xlsx?), not CSV`,
        'export it as "CSV UTF-8"',
      );
    }
    if (sig([0x50, 0x41, 0x52, 0x31])) {
      throw new InputError(
        this.name,
        undefined,
        `${what}a Parquet file, read as text`,
        'name it .parquet or add --input-format parquet',
      );
    }
    if (this.gunzipping && sig([0x1f, 0x8b])) {
      throw new InputError(this.name, undefined, 'gzip-compressed twice', 'decompress it once first, e.g. gunzip FILE');
    }
  }
}

/** Where a trailing, not yet complete UTF-8 sequence starts (buf.length if none). */
function incompleteTailStart(buf: Buffer): number {
  const n = buf.length;
  for (let back = 1; back <= 3 && back <= n; back++) {
    const b = buf[n - back];
    if ((b & 0xc0) === 0x80) continue; // continuation byte: keep looking for the lead
    const need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
    return need > back ? n - back : n;
  }
  return n;
}
