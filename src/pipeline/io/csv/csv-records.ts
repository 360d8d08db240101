/** CSV records with the physical line each starts on, from a whole input read by read or from one piece of it. */
import { Parser } from 'csv-parse';
import { LineIndex } from '../line-index.js';
import { MAX_RECORD_BYTES } from '../record-limit.js';
import { InputError, type InputRow, type SourceProblemCounts } from '../table.js';
import { fitRow } from './fit-row.js';
import { isSplittablePiece, splitPieceRows } from './piece-rows.js';

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

export interface CsvSettings {
  delimiter: string;
  header: boolean;
  encoding: 'utf8' | 'latin1';
}

/**
 * csv-parse driven over the bytes of one input (a whole file, or one record-aligned piece of it in a worker
 * thread): each record with the physical line it starts on, and parse errors as InputErrors with that line.
 */
export class CsvRecords {
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

function noop(): void {}
