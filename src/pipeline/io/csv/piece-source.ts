/** A CSV input as record-aligned pieces of bytes for the row threads, its header read here. */
import { ByteInput } from '../byte-input.js';
import { MAX_RECORD_BYTES } from '../record-limit.js';
import { parseCsvRecords, type CsvSettings } from './csv-records.js';
import { CsvPieceCutter, cutPieces, type CsvPiece } from './piece-cutter.js';
import { uniqueHeader } from './unique-header.js';
import { InputError, type OpenSourceOptions, type SourceProblemCounts, type TableInfo } from '../table.js';

/** Bytes per piece handed to a worker thread: big enough that a task's fixed cost is noise, small enough to spread. */
const PIECE_BYTES = 256 * 1024;

/**
 * A CSV input read as record-aligned pieces of bytes, for worker threads to parse (row-threads.ts). The header is
 * parsed here, on this thread, so the identifier columns are known before any thread starts.
 */
export interface CsvPieceSource extends TableInfo {
  /** Parser settings every piece must be parsed with. */
  settings: Pick<CsvSettings, 'delimiter' | 'encoding'>;
  /** Cells per row (the header's). */
  width: number;
  /** The pieces after the header, in input order; iterate once. */
  pieces(): AsyncIterable<CsvPiece>;
  /** Adds the row problems found by whoever parsed the pieces, for problems(). */
  addProblems(more: SourceProblemCounts): void;
}

export async function openCsvPieces(
  opts: Pick<OpenSourceOptions, 'path' | 'stream' | 'delimiter' | 'header' | 'encoding' | 'signal'>,
  pieceBytes = PIECE_BYTES,
): Promise<CsvPieceSource> {
  const input = await ByteInput.open(opts);
  const settings = { delimiter: opts.delimiter, encoding: opts.encoding };
  const cutter = new CsvPieceCutter(settings.delimiter, pieceBytes, settings.encoding);
  let header = true;
  const pieces = cutPieces(
    cutter,
    async () => (await input.next())?.buf,
    () => header,
    () => {
      if (cutter.pendingBytes > MAX_RECORD_BYTES + pieceBytes) throw overlongRecord(cutter, settings, input.name);
    },
  );
  try {
    // the header is the first record; with --no-header it only sets the width and stays a row
    let first: CsvPiece | undefined;
    let record: string[] | undefined;
    while (record === undefined) {
      const next = await pieces.next();
      // the end, and no record in the whole input (empty, or only empty lines)
      if (next.done === true) break;
      first = next.value;
      // a piece of only empty lines has no record: the header is further down
      record = parseCsvRecords(first, settings, input.name)[0];
    }
    header = false;
    return new PieceReader(input, settings, record, opts.header ? undefined : first, pieces);
  } catch (err) {
    input.close();
    throw err;
  }
}

/**
 * No record boundary in more than the longest record allowed: a quote that is never closed, usually. Parsing
 * what is held gives the error, with its line, that a single parser would have given.
 */
function overlongRecord(
  cutter: CsvPieceCutter,
  settings: Pick<CsvSettings, 'delimiter' | 'encoding'>,
  name: string,
): Error {
  const held = cutter.finish();
  if (held !== undefined) parseCsvRecords(held, settings, name);
  return new InputError(
    name,
    held?.startLine,
    `no record ends within ${MAX_RECORD_BYTES / 1024 / 1024} MB`,
    'a quote is probably never closed, or the --delimiter is wrong',
  );
}

class PieceReader implements CsvPieceSource {
  readonly header: string[];
  readonly notes: string[] = [];
  readonly width: number;
  readonly name: string;
  readonly totalBytes: number | undefined;
  private readonly counts: SourceProblemCounts = { shortRows: 0, longRows: 0, extraKeys: 0 };
  private iterated = false;

  constructor(
    private readonly input: ByteInput,
    readonly settings: Pick<CsvSettings, 'delimiter' | 'encoding'>,
    record: string[] | undefined,
    /** With --no-header, the first record is a row: its piece goes first. */
    private readonly firstRow: CsvPiece | undefined,
    /** The pieces after the first record, as cutPieces cuts them. */
    private readonly cut: AsyncGenerator<CsvPiece, void, undefined>,
  ) {
    this.name = input.name;
    this.totalBytes = input.totalBytes;
    this.width = record?.length ?? 0;
    if (record === undefined) this.header = [];
    else if (firstRow !== undefined) this.header = record.map((_, i) => `col${i + 1}`);
    else {
      const unique = uniqueHeader(record);
      this.header = unique.header;
      this.notes.push(...unique.notes);
    }
  }

  bytesRead(): number {
    return this.input.bytesRead();
  }

  problems(): SourceProblemCounts {
    return { ...this.counts };
  }

  addProblems(more: SourceProblemCounts): void {
    this.counts.shortRows += more.shortRows;
    this.counts.longRows += more.longRows;
    this.counts.extraKeys += more.extraKeys;
  }

  /** Lets go of the input without reading its pieces (after the header was looked at). */
  close(): void {
    this.input.close();
  }

  pieces(): AsyncIterable<CsvPiece> {
    if (this.iterated) throw new Error(`${this.name}: pieces() can be iterated only once`);
    this.iterated = true;
    return this.read();
  }

  private async *read(): AsyncGenerator<CsvPiece> {
    try {
      if (this.firstRow !== undefined) yield this.firstRow;
      for await (const piece of this.cut) {
        // lets the byte checker's line index forget the lines before the piece (it would grow with the file)
        this.input.lines.lineAt(piece.startOffset);
        yield piece;
      }
    } finally {
      this.input.close();
    }
  }
}
