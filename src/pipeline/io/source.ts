import { isUtf8 } from 'node:buffer';
import { constants as fsConstants, open as openFd } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { Socket } from 'node:net';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { promisify } from 'node:util';
import { createGunzip } from 'node:zlib';
import { Parser } from 'csv-parse';
import { BadRecords, badBytesIn, firstInvalidUtf8, invalidUtf8, nextLineStart, type BadByte } from './bad-records.js';
import {
  openFailure,
  InputError,
  readInterrupted,
  type InputRow,
  type OpenSourceOptions,
  type RowProblem,
  type SourceProblemCounts,
  type TableSource,
} from './table.js';

/** Longest record (CSV) or line (JSONL) accepted; beyond it the file is almost surely mis-parsed. */
export const MAX_RECORD_BYTES = 16 * 1024 * 1024;
const DEFAULT_CHUNK_ROWS = 2000;
const READ_CHUNK_BYTES = 64 * 1024;

/** Opens a CSV, JSONL (either may be gzipped) or Parquet table. Resolves once the header is known. */
export async function openSource(opts: OpenSourceOptions): Promise<TableSource> {
  const format = resolveFormat(opts);
  // the Parquet reader is loaded only for a Parquet input: a CSV run (and every row thread) goes without it
  if (format === 'parquet') return (await import('./parquet/parquet-source.js')).openParquetSource(opts);
  const input = await ByteInput.open(opts);
  const chunkRows = Math.max(1, opts.chunkRows ?? DEFAULT_CHUNK_ROWS);
  const bad = opts.onBadRecord !== undefined ? new BadRecords(input.name, opts.onBadRecord) : undefined;
  input.skipBadBytes = bad !== undefined;
  const table =
    format === 'jsonl'
      ? new JsonlTable(input, chunkRows, opts.encoding ?? 'utf8', bad)
      : new CsvTable(
          input,
          chunkRows,
          {
            delimiter: parseDelimiter(opts.delimiter, input.name),
            header: opts.header ?? true,
            encoding: opts.encoding ?? 'utf8',
          },
          bad,
        );
  try {
    await table.open();
  } catch (err) {
    input.close();
    throw err;
  }
  return table;
}

export function resolveFormat(opts: OpenSourceOptions): 'csv' | 'jsonl' | 'parquet' {
  if (opts.format === 'csv' || opts.format === 'jsonl' || opts.format === 'parquet') return opts.format;
  if (/\.parquet$/i.test(opts.path)) return 'parquet';
  // `.csv.gz`, `.jsonl.gz`: the format is the name under the compression
  return /\.(jsonl|ndjson)(\.gz)?$/i.test(opts.path) ? 'jsonl' : 'csv';
}

/** `--delimiter`: one character; `\t` and `tab` both mean a tab, because a literal tab is hard to type. */
export function parseDelimiter(value: string | undefined, file: string): string {
  if (value === undefined || value === '') return ',';
  if (value === '\\t' || value.toLowerCase() === 'tab') return '\t';
  if ([...value].length !== 1 || value === '"' || value === '\n' || value === '\r') {
    throw new InputError(
      file,
      undefined,
      `--delimiter must be one character other than a quote or a line break`,
      'e.g. --delimiter ";" or --delimiter tab',
    );
  }
  return value;
}

/**
 * Physical line numbers for byte offsets. csv-parse's own line counter counts CRLF twice inside quoted cells,
 * so lines are counted here from the bytes: a line ends at LF, or at a CR not followed by LF, so files whose
 * lines end differently from one line to the next are counted right too.
 * Queries must come with non-decreasing offsets (records and errors arrive in file order).
 */
export class LineIndex {
  private terminators: number[] = [];
  private head = 0;
  private passed = 0;
  /** A CR that ended the previous read: a terminator unless the next read starts with LF. */
  private pendingCr = -1;

  /** `firstLine`: the line of offset 0 (a piece of a file starts further down). */
  constructor(private readonly firstLine = 1) {}

  add(buf: Buffer, start: number): void {
    if (this.pendingCr !== -1) {
      if (buf.length === 0) return;
      if (buf[0] !== 10) this.terminators.push(this.pendingCr);
      this.pendingCr = -1;
    }
    let lf = buf.indexOf(10);
    let cr = buf.indexOf(13);
    while (lf !== -1 || cr !== -1) {
      if (cr !== -1 && (lf === -1 || cr < lf)) {
        if (cr + 1 === buf.length) this.pendingCr = start + cr;
        else if (buf[cr + 1] !== 10) this.terminators.push(start + cr);
        cr = buf.indexOf(13, cr + 1);
      } else {
        this.terminators.push(start + lf);
        lf = buf.indexOf(10, lf + 1);
      }
    }
  }

  /** The 1-based line the byte at `offset` is on. */
  lineAt(offset: number): number {
    const ts = this.terminators;
    while (this.head < ts.length && ts[this.head] < offset) this.head++;
    if (this.head > 8192) {
      this.passed += this.head;
      this.terminators = ts.slice(this.head);
      this.head = 0;
    }
    const pending = this.pendingCr !== -1 && this.pendingCr < offset ? 1 : 0;
    return this.passed + this.head + pending + this.firstLine;
  }
}

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

  static async open(opts: OpenSourceOptions): Promise<ByteInput> {
    const isStdin = opts.path === '-';
    const name = isStdin ? '<stdin>' : opts.path;
    const validate = (opts.encoding ?? 'utf8') === 'utf8';
    if (opts.stream) {
      return new ByteInput(name, undefined, opts.stream, opts.stream[Symbol.asyncIterator](), validate, false);
    }
    if (isStdin) {
      return new ByteInput(name, undefined, process.stdin, process.stdin[Symbol.asyncIterator](), validate, false);
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

  /**
   * From here on reads come out of a gunzip fed with `head` and the rest of the input. It holds at most its
   * own buffers, so memory stays bounded whatever the file's size; concatenated gzip members are read on.
   */
  private startGunzip(head: Buffer): void {
    const raw = this.iterator;
    const count = (n: number) => {
      this.consumed += n;
    };
    async function* compressed(): AsyncGenerator<Buffer> {
      yield head;
      for (;;) {
        const r = await raw.next();
        if (r.done) return;
        const buf = asBuffer(r.value);
        count(buf.length);
        yield buf;
      }
    }
    const gunzip = createGunzip({ chunkSize: READ_CHUNK_BYTES });
    // the error reaches the reader through the gunzip's own iterator; this promise only must not go unhandled
    pipeline(Readable.from(compressed(), { objectMode: false }), gunzip).catch(() => undefined);
    this.iterator = gunzip[Symbol.asyncIterator]();
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

/** What a failing gunzip means for the user: the file was cut short, or is not (or no longer) gzip. */
function gzipFailure(name: string, err: unknown): InputError {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'Z_BUF_ERROR') {
    return new InputError(
      name,
      undefined,
      'the gzip data ends early (a truncated file?)',
      'copy or download it again, completely',
    );
  }
  return new InputError(
    name,
    undefined,
    `corrupt gzip data (${code ?? 'unreadable'})`,
    'copy or download it again, or check how it was compressed',
  );
}

function asBuffer(chunk: Buffer | string): Buffer {
  return typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
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

/** Fits a record to the header width, noting how it did not fit. */
export function fitRow(line: number, cells: string[], width: number, counts: SourceProblemCounts): InputRow {
  const n = cells.length;
  if (n === width) return { line, cells };
  if (n < width) {
    counts.shortRows++;
    for (let i = n; i < width; i++) cells.push('');
    return { line, cells, problem: { kind: 'short_row', cells: n, expected: width } };
  }
  // a trailing delimiter (`a,b,`) adds empty cells only: nothing is shifted, so it is not a problem
  let extraEmpty = true;
  for (let i = width; i < n; i++) {
    if (cells[i] !== '') {
      extraEmpty = false;
      break;
    }
  }
  cells.length = width;
  if (extraEmpty) return { line, cells };
  counts.longRows++;
  return { line, cells, problem: { kind: 'long_row', cells: n, expected: width } };
}

/** Makes header names usable as keys: duplicates get `_2`, `_3`...; empty names become `colN`. */
export function uniqueHeader(names: string[]): { header: string[]; notes: string[] } {
  const notes: string[] = [];
  const seen = new Set<string>();
  const header: string[] = [];
  const taken = new Set(names);
  for (let i = 0; i < names.length; i++) {
    let name = names[i];
    if (name.trim() === '') {
      name = `col${i + 1}`;
      for (let k = 2; taken.has(name); k++) name = `col${i + 1}_${k}`;
      notes.push(`column ${i + 1} has no name in the header; calling it '${name}'`);
    } else if (seen.has(name)) {
      let k = 2;
      while (taken.has(`${name}_${k}`) || seen.has(`${name}_${k}`)) k++;
      const renamed = `${name}_${k}`;
      notes.push(`header name '${name}' appears more than once; column ${i + 1} is called '${renamed}'`);
      name = renamed;
    }
    seen.add(name);
    taken.add(name);
    header.push(name);
  }
  return { header, notes };
}

/** What csv-parse's core exposes and this module relies on (csv-parse is pinned to an exact version). */
interface CsvCore {
  parse(buf: Buffer | undefined, end: boolean, push: (record: string[]) => void, close: () => void): Error | undefined;
  readonly info: { readonly bytes: number; readonly empty_lines: number };
  /** Whether the parser is inside a quoted value. */
  readonly state: { readonly quoting: boolean };
}

/**
 * The parser's synchronous core, driven one read at a time: each record is seen the moment it is complete,
 * with its byte offset (for its line number), and without a promise or event per row. The stream wrapper
 * would lose both: it batches records in its own buffer, and async iteration per row is the slow path.
 */
function csvCore(options: ConstructorParameters<typeof Parser>[0]): CsvCore {
  const parser = new Parser(options) as Parser & { api?: CsvCore };
  const core = parser.api;
  if (core === undefined || typeof core.parse !== 'function') {
    throw new Error('csv-parse internals changed: this build expects csv-parse 7.0.x');
  }
  return core;
}

abstract class TableBase implements TableSource {
  header: string[] = [];
  notes: string[] = [];
  readonly name: string;
  readonly totalBytes: number | undefined;
  protected ready: InputRow[] = [];
  protected ended = false;
  protected readonly counts: SourceProblemCounts = { shortRows: 0, longRows: 0, extraKeys: 0 };
  private iterated = false;

  constructor(
    protected readonly input: ByteInput,
    protected readonly chunkRows: number,
  ) {
    this.name = input.name;
    this.totalBytes = input.totalBytes;
  }

  abstract open(): Promise<void>;
  /** Reads and parses one more piece of input into `ready`; sets `ended` at the end. */
  protected abstract pump(): Promise<void>;

  bytesRead(): number {
    return this.input.bytesRead();
  }

  close(): void {
    this.input.close();
  }

  problems(): SourceProblemCounts {
    return { ...this.counts };
  }

  rows(): AsyncIterable<InputRow[]> {
    if (this.iterated) throw new Error(`${this.name}: rows() can be iterated only once`);
    this.iterated = true;
    return this.chunks();
  }

  private async *chunks(): AsyncGenerator<InputRow[]> {
    try {
      for (;;) {
        while (this.ready.length < this.chunkRows && !this.ended) await this.pump();
        if (this.ready.length === 0) return;
        if (this.ready.length <= this.chunkRows) {
          const out = this.ready;
          this.ready = [];
          yield out;
        } else {
          yield this.ready.splice(0, this.chunkRows);
        }
      }
    } finally {
      this.input.close();
    }
  }
}

export interface CsvSettings {
  delimiter: string;
  header: boolean;
  encoding: 'utf8' | 'latin1';
}

/**
 * csv-parse driven over the bytes of one input (a whole file, or one record-aligned piece of it in a worker
 * thread): each record with the physical line it starts on, and parse errors as InputErrors with that line.
 */
class CsvRecords {
  private readonly core: CsvCore;
  /** Line after the last record (where the next one, or the blank lines before it, start). */
  private nextLine: number;
  private emptyLinesSeen = 0;

  /**
   * `onRecord` gets each record with its line and the offset just past it; `base` is the offset of the first byte
   * this parser is given (not 0 when parsing starts again after a record that could not be parsed).
   */
  constructor(
    settings: Pick<CsvSettings, 'delimiter' | 'encoding'>,
    private readonly name: string,
    private readonly lines: LineIndex,
    firstLine: number,
    private readonly onRecord: (line: number, record: string[], end: number) => void,
    private readonly base = 0,
  ) {
    this.nextLine = firstLine;
    this.core = csvCore({
      delimiter: settings.delimiter,
      encoding: settings.encoding,
      bom: false, // stripped by ByteInput, so byte offsets match the file
      // every line end everywhere: csv-parse would otherwise take the first line's and keep a later \r inside the
      // last cell (a silently wrong hash), or merge two rows into one when a later line ends differently
      record_delimiter: ['\r\n', '\n', '\r'],
      relax_column_count: true, // ragged rows are fitted and reported per row, not a crash
      relax_quotes: true, // a quote inside an unquoted value (O"Brien) is kept as text, as Excel and Python read it
      skip_empty_lines: true,
      max_record_size: MAX_RECORD_BYTES,
    });
  }

  /** Parses the next bytes (undefined: the end of the input). Throws InputError on a parse error. */
  parse(buf: Buffer | undefined): void {
    const err =
      buf === undefined
        ? this.core.parse(undefined, true, this.push, noop)
        : this.core.parse(buf, false, this.push, noop);
    if (err !== undefined) throw this.parseFailure(err);
  }

  private readonly push = (record: string[]): void => {
    const info = this.core.info;
    const line = this.nextLine + (info.empty_lines - this.emptyLinesSeen);
    this.emptyLinesSeen = info.empty_lines;
    const end = this.base + info.bytes;
    this.nextLine = this.lines.lineAt(end);
    this.onRecord(line, record, end);
  };

  private parseFailure(err: Error): InputError {
    if (err instanceof InputError) return err;
    const start = this.nextLine + (this.core.info.empty_lines - this.emptyLinesSeen);
    const code = (err as Error & { code?: string }).code;
    // csv-parse's own messages quote cell values, which may be emails or phones: never pass them on
    switch (code) {
      case 'CSV_QUOTE_NOT_CLOSED':
        return new InputError(
          this.name,
          start,
          'a quoted value opens on this line and is never closed',
          'look for a stray " (a quote inside a quoted value is written "")',
        );
      case 'CSV_MAX_RECORD_SIZE':
        // inside a quoted value, line breaks are text: a quote never closed swallows the rest of the file
        return this.core.state.quoting
          ? new InputError(
              this.name,
              start,
              `the record starting on this line is longer than ${MAX_RECORD_BYTES / 1024 / 1024} MB`,
              'a quote is probably never closed, or the --delimiter is wrong',
            )
          : overlongLine(this.name, start);
      case 'CSV_INVALID_CLOSING_QUOTE':
      case 'CSV_NON_TRIMABLE_CHAR_AFTER_CLOSING_QUOTE':
        return new InputError(
          this.name,
          start,
          'a quoted value is followed by something other than the delimiter',
          'check the --delimiter and the quoting',
        );
      default:
        return new InputError(
          this.name,
          start,
          `not readable as CSV (${code ?? 'parse error'})`,
          'check the --delimiter, --encoding and quoting',
        );
    }
  }
}

/**
 * A record longer than the limit that is not inside a quote: its line itself is that long. No flag raises the limit:
 * a line of that size is not a row of identifiers, but another format, or lines ended by something else.
 */
export function overlongLine(name: string, line: number | undefined): InputError {
  const mb = MAX_RECORD_BYTES / 1024 / 1024;
  return new InputError(
    name,
    line,
    `the record starting on this line is longer than ${mb} MB (the limit; no quote is open: the line itself does not end)`,
    'is it CSV, with lines ending in LF, CRLF or CR? (--input-format names another format; --on-bad-row skip leaves the record out)',
  );
}

/** A record-aligned piece of a CSV input (io/csv/piece-cutter.ts): its bytes and the line its first byte is on. */
export interface CsvPieceInput {
  bytes: Uint8Array;
  startLine: number;
}

/**
 * The rows of one record-aligned piece, exactly as CsvTable reads them from the whole file: the same parser
 * options, line numbers and fitting to the header's `width`. Row problems are added to `counts`.
 */
export function parseCsvPiece(
  piece: CsvPieceInput,
  settings: Pick<CsvSettings, 'delimiter' | 'encoding'>,
  width: number,
  name: string,
  counts: SourceProblemCounts,
): InputRow[] {
  const bytes = Buffer.from(piece.bytes.buffer, piece.bytes.byteOffset, piece.bytes.byteLength);
  if (isSplittablePiece(bytes, settings)) {
    const rows = splitPieceRows(bytes.toString(settings.encoding), piece.startLine, settings.delimiter, width, counts);
    if (rows !== undefined) return rows;
  }
  const rows: InputRow[] = [];
  const lines = new LineIndex(piece.startLine);
  lines.add(bytes, 0);
  const records = new CsvRecords(settings, name, lines, piece.startLine, (line, record) =>
    rows.push(fitRow(line, record, width, counts)),
  );
  records.parse(bytes);
  records.parse(undefined);
  return rows;
}

const QUOTE = 0x22;

/**
 * A piece this module can split as text, exactly as csv-parse splits its bytes: no record in it can exceed the
 * longest allowed (so csv-parse could not fail on that), no NUL (csv-parse takes a NUL after a closing quote for
 * the end of the input), and a delimiter that is the same character once decoded (in latin1 a delimiter outside
 * Latin-1 is truncated to one byte, which csv-parse then matches as that byte).
 */
function isSplittablePiece(bytes: Buffer, settings: Pick<CsvSettings, 'delimiter' | 'encoding'>): boolean {
  return bytes.length <= MAX_RECORD_BYTES && bytes.indexOf(0) === -1 && delimiterSurvives(settings);
}

function delimiterSurvives(settings: Pick<CsvSettings, 'delimiter' | 'encoding'>): boolean {
  return (
    settings.encoding === 'utf8' || Buffer.from(settings.delimiter, 'latin1').toString('latin1') === settings.delimiter
  );
}

/**
 * The records of a piece without a quote as lines of text (empty lines skipped, as parsing skips them), or
 * undefined when the piece has a quote. With ',' as the delimiter such a line is already the CSV text of its cells.
 */
export function plainPieceLines(piece: Uint8Array, encoding: CsvSettings['encoding']): string[] | undefined {
  const bytes = Buffer.from(piece.buffer, piece.byteOffset, piece.byteLength);
  if (bytes.indexOf(QUOTE) !== -1 || bytes.length > MAX_RECORD_BYTES) return undefined;
  const text = bytes.toString(encoding);
  const records: string[] = [];
  let lf = -1;
  let cr = -1;
  for (let pos = 0; pos < text.length; ) {
    if (lf < pos) lf = nextOf(text, '\n', pos);
    if (cr < pos) cr = nextOf(text, '\r', pos);
    const end = Math.min(lf, cr);
    if (end > pos) records.push(text.slice(pos, end));
    pos = end + (end === cr && text.charCodeAt(end + 1) === LF ? 2 : 1);
  }
  return records;
}

const LF = 10;
const CR = 13;
const DQUOTE = 34;

/** Where `search` next occurs in `text` at or after `from`, or text.length when it does not. */
function nextOf(text: string, search: string, from: number): number {
  const at = text.indexOf(search, from);
  return at === -1 ? text.length : at;
}

/**
 * The rows of a piece, split as csv-parse splits them with CsvRecords' options (relax_quotes, every line break
 * ends a record, empty lines skipped), or undefined when a quoted value is never closed: csv-parse then reads
 * the piece, for its error. csv-parse walks every byte through its state machine, the largest cost of a row;
 * here the text is only searched, with String#indexOf, for the next quote, delimiter and line break, and cells
 * are slices of it (which is also faster than splitting a quote-free piece into lines and then cells).
 * What csv-parse does, and this follows:
 * - a quote opens a quoted value only as a field's first character; anywhere else it is text (O"Brien);
 * - inside a quoted value, `""` is one quote and line breaks and delimiters are text; a quote followed by the
 *   delimiter, a line break or the end closes it;
 * - any other quote closes it too but keeps the quotes as text, and the field goes on unquoted up to the next
 *   delimiter or line break: `"a""b"x,` is the cell `"a"b"x` (the escaped quote stays one quote);
 * - a line of only line breaks is skipped, but `""` alone is a record of one empty cell.
 * Line numbers count LF, CRLF and a lone CR, inside quoted values too, as LineIndex does.
 */
export function splitPieceRows(
  text: string,
  startLine: number,
  delimiter: string,
  width: number,
  counts: SourceProblemCounts,
): InputRow[] | undefined {
  const n = text.length;
  const dl = delimiter.length;
  const rows: InputRow[] = [];
  let pos = 0;
  let line = startLine;
  // the next delimiter, LF and CR at or after where they were last looked for (n: none)
  let nextDelimiter = -1;
  let nextLf = -1;
  let nextCr = -1;
  while (pos < n) {
    // empty lines before the record
    let c = text.charCodeAt(pos);
    if (c === LF || c === CR) {
      pos += c === CR && text.charCodeAt(pos + 1) === LF ? 2 : 1;
      line++;
      continue;
    }
    const recordLine = line;
    const cells: string[] = [];
    for (;;) {
      let value: string;
      let end: number;
      if (text.charCodeAt(pos) === DQUOTE) {
        value = '';
        let from = pos + 1;
        let q: number;
        for (;;) {
          q = text.indexOf('"', from);
          if (q === -1) return undefined;
          if (text.charCodeAt(q + 1) !== DQUOTE) break;
          value += text.slice(from, q + 1);
          from = q + 2;
        }
        value += text.slice(from, q);
        // line breaks inside the quoted value
        if (nextLf < pos) nextLf = nextOf(text, '\n', pos);
        while (nextLf < q) {
          line++;
          nextLf = nextOf(text, '\n', nextLf + 1);
        }
        if (nextCr < pos) nextCr = nextOf(text, '\r', pos);
        while (nextCr < q) {
          if (text.charCodeAt(nextCr + 1) !== LF) line++;
          nextCr = nextOf(text, '\r', nextCr + 1);
        }
        end = q + 1;
        c = text.charCodeAt(end);
        if (end < n && c !== LF && c !== CR && !text.startsWith(delimiter, end)) {
          // junk after the closing quote: the quotes stay, and the field goes on unquoted
          if (nextDelimiter < end) nextDelimiter = nextOf(text, delimiter, end);
          if (nextLf < end) nextLf = nextOf(text, '\n', end);
          if (nextCr < end) nextCr = nextOf(text, '\r', end);
          const stop = Math.min(nextDelimiter, nextLf, nextCr);
          value = `"${value}"${text.slice(end, stop)}`;
          end = stop;
        }
      } else {
        if (nextDelimiter < pos) nextDelimiter = nextOf(text, delimiter, pos);
        if (nextLf < pos) nextLf = nextOf(text, '\n', pos);
        if (nextCr < pos) nextCr = nextOf(text, '\r', pos);
        end = Math.min(nextDelimiter, nextLf, nextCr);
        value = text.slice(pos, end);
      }
      cells.push(value);
      if (end >= n) {
        pos = n;
        break;
      }
      c = text.charCodeAt(end);
      if (c === LF || c === CR) {
        pos = end + (c === CR && text.charCodeAt(end + 1) === LF ? 2 : 1);
        line++;
        break;
      }
      pos = end + dl;
    }
    rows.push(fitRow(recordLine, cells, width, counts));
  }
  return rows;
}

/** The records of one piece as they are (the header piece, before the width is known). */
export function parseCsvRecords(
  piece: CsvPieceInput,
  settings: Pick<CsvSettings, 'delimiter' | 'encoding'>,
  name: string,
): string[][] {
  const out: string[][] = [];
  const lines = new LineIndex(piece.startLine);
  const bytes = Buffer.from(piece.bytes.buffer, piece.bytes.byteOffset, piece.bytes.byteLength);
  lines.add(bytes, 0);
  const records = new CsvRecords(settings, name, lines, piece.startLine, (_line, record) => out.push(record));
  records.parse(bytes);
  records.parse(undefined);
  return out;
}

class CsvTable extends TableBase {
  private records: CsvRecords;
  private width = -1;
  private headerPending: boolean;
  /** Rows taken (not skipped), for the bad-record guard. */
  private good = 0;
  /** Skip mode: offset just past the last record, where the next one (or the empty lines before it) starts. */
  private lastEnd = 0;
  /** Skip mode: the bytes from lastEnd on, to parse again after a record that cannot be parsed. */
  private held: Buffer[] = [];
  private heldStart = 0;
  /** Skip mode: bad bytes not yet inside a record, by offset. */
  private badBytes: BadByte[] = [];
  /** Skip mode: the rest of a bad record's line is still to come and to be passed over. */
  private passOverLine = false;

  constructor(
    input: ByteInput,
    chunkRows: number,
    private readonly settings: CsvSettings,
    private readonly bad: BadRecords | undefined,
  ) {
    super(input, chunkRows);
    this.headerPending = settings.header;
    this.records = this.parserAt(1, 0);
  }

  private parserAt(line: number, offset: number): CsvRecords {
    return new CsvRecords(
      this.settings,
      this.input.name,
      this.input.lines,
      line,
      (l, record, end) => this.take(l, record, end),
      offset,
    );
  }

  async open(): Promise<void> {
    // the header is the first record; with --no-header the first record sets the width and stays a row
    while (!this.ended && this.width < 0) await this.pump();
  }

  protected async pump(): Promise<void> {
    const next = await this.input.next();
    if (next === null) this.ended = true;
    if (this.bad === undefined) {
      this.records.parse(next === null ? undefined : next.buf);
      return;
    }
    if (next !== null && next.bad !== undefined) this.badBytes.push(...next.bad);
    let buf = next === null ? undefined : next.buf;
    if (next !== null && this.passOverLine) {
      const at = nextLineStart(next.buf, next.start, next.start, false);
      if (at === undefined) {
        this.dropBadBytesBefore(next.start + next.buf.length);
        return;
      }
      this.passOverLine = false;
      this.restartAt(at);
      buf = next.buf.subarray(at - next.start);
    }
    if (this.passOverLine) return; // the input ended inside the bad record's line
    if (buf !== undefined) this.held.push(buf);
    this.parseSkipping(buf, next === null);
    this.trimHeld();
  }

  /**
   * Parses in skip mode: a record that cannot be parsed (a quote never closed, a record over the size limit) is
   * reported by the line it starts on, and parsing starts again on the next line, from the bytes held.
   */
  private parseSkipping(buf: Buffer | undefined, end: boolean): void {
    let give = buf;
    for (;;) {
      try {
        if (give !== undefined) {
          const b = give;
          give = undefined;
          this.records.parse(b);
        }
        if (end) this.records.parse(undefined);
        return;
      } catch (err) {
        if (!(err instanceof InputError) || err.line === undefined || this.width < 0 || this.bad === undefined)
          throw err;
        this.bad.skip(err.line, err.problem, this.good);
        const held = Buffer.concat(this.held);
        const at = nextLineStart(held, this.heldStart, this.lastEnd);
        if (at === undefined) {
          // its first line goes on past what was read: pass over the rest of it as it comes
          this.passOverLine = !end;
          this.held = [];
          this.heldStart = this.heldStart + held.length;
          this.lastEnd = this.heldStart;
          this.dropBadBytesBefore(this.heldStart);
          return;
        }
        const rest = held.subarray(at - this.heldStart);
        this.restartAt(at);
        this.held = rest.length > 0 ? [rest] : [];
        give = rest.length > 0 ? rest : undefined;
      }
    }
  }

  /** A fresh parser for the bytes from `offset` on (the start of a line). */
  private restartAt(offset: number): void {
    this.lastEnd = offset;
    this.heldStart = offset;
    this.dropBadBytesBefore(offset);
    this.records = this.parserAt(this.input.lines.lineAt(offset), offset);
  }

  private dropBadBytesBefore(offset: number): void {
    let k = 0;
    while (k < this.badBytes.length && this.badBytes[k].offset < offset) k++;
    if (k > 0) this.badBytes.splice(0, k);
  }

  /** Lets go of the held bytes before the last record's end: they will not be parsed again. */
  private trimHeld(): void {
    while (this.held.length > 0 && this.heldStart + this.held[0].length <= this.lastEnd) {
      this.heldStart += this.held[0].length;
      this.held.shift();
    }
  }

  private take(line: number, record: string[], end: number): void {
    if (this.bad !== undefined) {
      this.lastEnd = end;
      let first: BadByte | undefined;
      while (this.badBytes.length > 0 && this.badBytes[0].offset < end) {
        const b = this.badBytes.shift() as BadByte;
        first ??= b;
      }
      if (first !== undefined) {
        if (this.width < 0) throw new InputError(this.input.name, line, first.problem, first.hint);
        this.bad.skip(line, first.problem, this.good);
        return;
      }
    }
    if (this.width < 0) {
      this.width = record.length;
      if (this.headerPending) {
        this.headerPending = false;
        const { header, notes } = uniqueHeader(record);
        this.header = header;
        this.notes.push(...notes);
        return;
      }
      this.header = record.map((_, i) => `col${i + 1}`);
    }
    this.good++;
    this.ready.push(fitRow(line, record, this.width, this.counts));
  }

  override problems(): SourceProblemCounts {
    return this.bad === undefined ? super.problems() : { ...super.problems(), badRows: this.bad.count };
  }
}

function noop(): void {}

type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

/** A JSONL value as a cell: text stays text, numbers and booleans become their JSON text, null becomes ''. */
function cellText(value: JsonValue | undefined): string {
  if (value === undefined || value === null) return '';
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return JSON.stringify(value);
}

/** The deepest a JSON Lines value may nest (the line's object is level 1). */
export const MAX_JSON_DEPTH = 1000;

/**
 * Whether JSON text nests arrays and objects deeper than `max`. Most lines have few brackets: their count bounds the
 * depth, and is found with native searches; only a line with more than `max` of them is walked.
 */
function nestedDeeperThan(text: string, max: number): boolean {
  let opening = 0;
  for (let i = text.indexOf('['); i !== -1 && opening <= max; i = text.indexOf('[', i + 1)) opening++;
  for (let i = text.indexOf('{'); i !== -1 && opening <= max; i = text.indexOf('{', i + 1)) opening++;
  if (opening <= max) return false;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // a backslash escapes the next character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}

interface JsonRecord {
  line: number;
  object: Record<string, JsonValue>;
}

class JsonlTable extends TableBase {
  private parts: Buffer[] = [];
  private partBytes = 0;
  private line = 0;
  private pendingObjects: JsonRecord[] = [];
  private headerIndex = new Map<string, number>();
  private headerFixed = false;
  /** Lines read well (skip mode: for the bad-record guard). */
  private good = 0;
  /** Skip mode: bad bytes on lines not yet taken, by offset. */
  private badBytes: BadByte[] = [];
  /** Skip mode: the rest of a line over the size limit is still to come and to be passed over. */
  private passOverLine = false;

  constructor(
    input: ByteInput,
    chunkRows: number,
    private readonly encoding: 'utf8' | 'latin1',
    private readonly bad: BadRecords | undefined,
  ) {
    super(input, chunkRows);
  }

  async open(): Promise<void> {
    // the header is the keys of the first chunk's objects, so a sparse first object does not hide columns
    while (!this.ended && this.pendingObjects.length < this.chunkRows) await this.pump();
    for (const rec of this.pendingObjects.slice(0, this.chunkRows)) {
      for (const key of Object.keys(rec.object)) {
        if (!this.headerIndex.has(key)) {
          this.headerIndex.set(key, this.header.length);
          this.header.push(key);
        }
      }
    }
    this.headerFixed = true;
    for (const rec of this.pendingObjects) this.ready.push(this.toRow(rec));
    this.pendingObjects = [];
  }

  protected async pump(): Promise<void> {
    const next = await this.input.next();
    if (next === null) {
      this.ended = true;
      if (this.partBytes > 0) this.takeLine(Buffer.concat(this.parts), Number.POSITIVE_INFINITY);
      this.parts = [];
      this.partBytes = 0;
      return;
    }
    const { buf } = next;
    if (next.bad !== undefined) this.badBytes.push(...next.bad);
    let from = 0;
    for (let nl = buf.indexOf(10); nl !== -1; nl = buf.indexOf(10, from)) {
      const piece = buf.subarray(from, nl);
      // the line ends at the LF: a bad byte before it is on this line
      const end = next.start + nl;
      if (this.passOverLine) {
        this.passOverLine = false;
        this.line++;
        this.dropBadBytesBefore(end);
      } else if (this.partBytes > 0) {
        this.parts.push(piece);
        this.takeLine(Buffer.concat(this.parts), end);
        this.parts = [];
        this.partBytes = 0;
      } else {
        this.takeLine(piece, end);
      }
      from = nl + 1;
    }
    // lines are counted here, not by the index: moving it on lets it drop the terminators already passed
    this.input.lines.lineAt(next.start + from);
    if (from < buf.length && this.passOverLine) this.dropBadBytesBefore(next.start + buf.length);
    else if (from < buf.length) {
      this.parts.push(buf.subarray(from));
      this.partBytes += buf.length - from;
      if (this.partBytes > MAX_RECORD_BYTES) {
        this.badLine(
          this.line + 1,
          `line longer than ${MAX_RECORD_BYTES / 1024 / 1024} MB`,
          'JSON Lines needs one object per line',
        );
        // skip mode: the line is passed over up to its end
        this.parts = [];
        this.partBytes = 0;
        this.passOverLine = true;
        this.dropBadBytesBefore(next.start + buf.length);
      }
    }
  }

  private dropBadBytesBefore(offset: number): void {
    while (this.badBytes.length > 0 && this.badBytes[0].offset < offset) this.badBytes.shift();
  }

  /** A line that cannot be read: an InputError, or in skip mode a skipped record. */
  private badLine(line: number, problem: string, hint: string): void {
    if (this.bad === undefined) throw new InputError(this.name, line, problem, hint);
    this.bad.skip(line, problem, this.good);
  }

  /** One line, whose LF (or the end of the input) is at offset `end`. */
  private takeLine(bytes: Buffer, end: number): void {
    this.line++;
    if (this.badBytes.length > 0 && this.badBytes[0].offset < end) {
      const first = this.badBytes[0];
      this.dropBadBytesBefore(end);
      this.badLine(this.line, first.problem, first.hint);
      return;
    }
    if (bytes.length > MAX_RECORD_BYTES) {
      this.badLine(
        this.line,
        `line longer than ${MAX_RECORD_BYTES / 1024 / 1024} MB`,
        'JSON Lines needs one object per line',
      );
      return;
    }
    const text = bytes.toString(this.encoding);
    if (text.trim() === '') return;
    let value: JsonValue;
    try {
      value = JSON.parse(text) as JsonValue;
    } catch {
      this.badLine(
        this.line,
        'not valid JSON',
        'each line must be one JSON object (JSON Lines); for a CSV file use --format csv',
      );
      return;
    }
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      this.badLine(this.line, 'not a JSON object', 'each line must be one object, e.g. {"email": "..."}');
      return;
    }
    // a nested value becomes its JSON text in the cell, written by recursion: one nested too deep would overflow
    if (nestedDeeperThan(text, MAX_JSON_DEPTH)) {
      this.badLine(
        this.line,
        `a value nested deeper than ${MAX_JSON_DEPTH.toLocaleString('en-US')} levels`,
        'flatten it, or leave such lines out with --on-bad-row skip',
      );
      return;
    }
    this.good++;
    const rec = { line: this.line, object: value };
    if (this.headerFixed) this.ready.push(this.toRow(rec));
    else this.pendingObjects.push(rec);
  }

  override problems(): SourceProblemCounts {
    return this.bad === undefined ? super.problems() : { ...super.problems(), badRows: this.bad.count };
  }

  private toRow(rec: JsonRecord): InputRow {
    const cells = new Array<string>(this.header.length).fill('');
    let unknown = 0;
    for (const key of Object.keys(rec.object)) {
      const i = this.headerIndex.get(key);
      if (i === undefined) unknown++;
      else cells[i] = cellText(rec.object[key]);
    }
    if (unknown === 0) return { line: rec.line, cells };
    this.counts.extraKeys++;
    const problem: RowProblem = { kind: 'extra_keys', keys: unknown };
    return { line: rec.line, cells, problem };
  }
}
