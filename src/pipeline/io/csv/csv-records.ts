/** The records of a record-aligned piece of CSV bytes, and what a record that cannot be read means for the user. */
import { MAX_RECORD_BYTES } from '../record-limit.js';
import { InputError, type InputRow, type PartReading, type SourceProblemCounts } from '../table.js';
import { fitRow } from './fit-row.js';
import { CsvSyntaxError, tokenizeCsv } from './tokenizer.js';

/** How a CSV input is read, as settled for it. */
export type CsvSettings = Pick<PartReading, 'delimiter' | 'header' | 'encoding'>;

/** A record-aligned piece of a CSV input (io/csv/piece-cutter.ts): its bytes and the line its first byte is on. */
export interface CsvPieceInput {
  bytes: Uint8Array;
  startLine: number;
}

/**
 * The delimiter as it reads in the decoded text. In Latin-1 a delimiter beyond it is the one byte its code is
 * truncated to, as the piece cutter matches it (`€` splits at 0xAC, read as `¬`).
 */
export function delimiterText(settings: Pick<CsvSettings, 'delimiter' | 'encoding'>): string {
  return settings.encoding === 'utf8'
    ? settings.delimiter
    : Buffer.from(settings.delimiter, 'latin1').toString('latin1');
}

/** Calls `onRecord` with each record of a piece; a record that cannot be read is an InputError with its line. */
export function readCsvRecords(
  piece: CsvPieceInput,
  settings: Pick<CsvSettings, 'delimiter' | 'encoding'>,
  name: string,
  onRecord: (line: number, cells: string[]) => void,
): void {
  const bytes = Buffer.from(piece.bytes.buffer, piece.bytes.byteOffset, piece.bytes.byteLength);
  try {
    tokenizeCsv(
      bytes.toString(settings.encoding),
      piece.startLine,
      delimiterText(settings),
      settings.encoding,
      onRecord,
    );
  } catch (err) {
    throw err instanceof CsvSyntaxError ? csvInputError(name, err) : err;
  }
}

/**
 * The rows of one record-aligned piece, exactly as CsvTable reads them from the whole file: the same records,
 * line numbers and fitting to the header's `width`. Row problems are added to `counts`.
 */
export function parseCsvPiece(
  piece: CsvPieceInput,
  settings: Pick<CsvSettings, 'delimiter' | 'encoding'>,
  width: number,
  name: string,
  counts: SourceProblemCounts,
): InputRow[] {
  const rows: InputRow[] = [];
  readCsvRecords(piece, settings, name, (line, cells) => rows.push(fitRow(line, cells, width, counts)));
  return rows;
}

/**
 * The most records a piece can hold: every record ends with a line break (LF, CR or CRLF) but maybe the last, so
 * there are at most one more than the LF and CR bytes. Counted natively, which costs little beside reading them.
 */
export function recordsAtMost(bytes: Uint8Array): number {
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let breaks = 0;
  for (const byte of [0x0a, 0x0d]) for (let at = b.indexOf(byte); at !== -1; at = b.indexOf(byte, at + 1)) breaks++;
  return breaks + 1;
}

/** The records of one piece as they are (the header piece, before the width is known). */
export function parseCsvRecords(
  piece: CsvPieceInput,
  settings: Pick<CsvSettings, 'delimiter' | 'encoding'>,
  name: string,
): string[][] {
  const out: string[][] = [];
  readCsvRecords(piece, settings, name, (_line, cells) => out.push(cells));
  return out;
}

/** The message for a record that cannot be read; never a cell's content, which may be an email or a phone. */
export function csvInputError(name: string, err: CsvSyntaxError): InputError {
  if (err.kind === 'unclosed') {
    return new InputError(
      name,
      err.line,
      'a quoted value opens on this line and is never closed',
      'look for a stray " (a quote inside a quoted value is written "")',
    );
  }
  // inside a quoted value, line breaks are text: a quote never closed swallows the rest of the file
  return err.quoting
    ? new InputError(
        name,
        err.line,
        `the record starting on this line is longer than ${MAX_RECORD_BYTES / 1024 / 1024} MB`,
        'a quote is probably never closed, or the --delimiter is wrong',
      )
    : overlongLine(name, err.line);
}

/**
 * A record longer than the limit that is not inside a quote: its line itself is that long. No flag raises the limit:
 * a line of that size is not a row of identifiers, but another format, or lines ended by something else.
 */
function overlongLine(name: string, line: number | undefined): InputError {
  const mb = MAX_RECORD_BYTES / 1024 / 1024;
  return new InputError(
    name,
    line,
    `the record starting on this line is longer than ${mb} MB (the limit; no quote is open: the line itself does not end)`,
    'is it CSV, with lines ending in LF, CRLF or CR? (--input-format names another format; --on-bad-row skip leaves the record out)',
  );
}
