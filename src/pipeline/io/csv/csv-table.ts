/** A CSV input as a table: its header, and its rows read on this thread, bad records skipped when asked. */
import { nextLineStart, type BadByte, type BadRecords } from '../bad-records.js';
import type { ByteInput } from '../byte-input.js';
import { MAX_RECORD_BYTES } from '../record-limit.js';
import { TableBase } from '../table-base.js';
import { InputError, type SourceProblemCounts } from '../table.js';
import { csvInputError, delimiterText, type CsvSettings } from './csv-records.js';
import { fitRow } from './fit-row.js';
import { CsvPieceCutter, type CsvPiece } from './piece-cutter.js';
import { CsvSyntaxError, tokenizeCsv } from './tokenizer.js';
import { uniqueHeader } from './unique-header.js';

/** Bytes per piece read here: a few reads, so the tokenizer's fixed cost per piece is noise. */
const PIECE_BYTES = 128 * 1024;

/**
 * Reads the input as record-aligned pieces (the cutter) and tokenizes each, as the row threads do. With
 * `--on-bad-row skip`, a piece that holds a bad byte or a record that cannot be read is cut again record by
 * record, so that each record's bytes are known: such a record is skipped by the line it starts on, and reading
 * starts again on the next line.
 */
export class CsvTable extends TableBase {
  private cutter: CsvPieceCutter;
  private readonly delimiter: string;
  private width = -1;
  private headerPending: boolean;
  /** Rows taken (not skipped), for the bad-record guard. */
  private good = 0;
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
    this.delimiter = delimiterText(settings);
    this.cutter = this.cutterAt(1, 0);
  }

  private cutterAt(line: number, offset: number, targetBytes = PIECE_BYTES): CsvPieceCutter {
    return new CsvPieceCutter(this.settings.delimiter, targetBytes, this.settings.encoding, { line, offset });
  }

  async open(): Promise<void> {
    // the header is the first record; with --no-header the first record sets the width and stays a row
    while (!this.ended && this.width < 0) await this.pump();
  }

  protected async pump(): Promise<void> {
    const next = await this.input.next();
    if (next === null) {
      this.ended = true;
      if (this.passOverLine) return; // the input ended inside the bad record's line
      const last = this.cutter.finish();
      if (last !== undefined) this.read(last, true);
      return;
    }
    if (next.bad !== undefined) this.badBytes.push(...next.bad);
    let buf = next.buf;
    if (this.passOverLine) {
      const at = nextLineStart(buf, next.start, next.start, false);
      if (at === undefined) {
        this.dropBadBytesBefore(next.start + buf.length);
        return;
      }
      this.passOverLine = false;
      this.dropBadBytesBefore(at);
      this.cutter = this.cutterAt(this.input.lines.lineAt(at), at);
      buf = buf.subarray(at - next.start);
    }
    this.cutter.push(buf);
    for (let piece = this.cutter.next(); piece !== undefined; piece = this.cutter.next()) {
      // lets the byte checker's line index forget the lines before the piece (it would grow with the file)
      this.input.lines.lineAt(piece.startOffset);
      if (!this.read(piece, false)) return;
    }
    // no record ends in more than the longest allowed: the held bytes end in a record too long to read
    if (this.cutter.pendingBytes > MAX_RECORD_BYTES + PIECE_BYTES) {
      const held = this.cutter.finish() as CsvPiece;
      this.cutter = this.cutterAt(1, held.startOffset + held.bytes.length);
      this.read(held, false);
    }
  }

  /**
   * Takes the records of a piece (`last`: the input ends with it). false when reading started again after a bad
   * record, with a new cutter: pieces still to come from the old one are not read.
   */
  private read(piece: CsvPiece, last: boolean): boolean {
    if (this.bad === undefined) {
      try {
        this.tokenize(piece, (line, cells) => this.take(line, cells));
      } catch (err) {
        throw err instanceof CsvSyntaxError ? csvInputError(this.name, err) : err;
      }
      return true;
    }
    const end = piece.startOffset + piece.bytes.length;
    if (this.badBytes.length === 0 || this.badBytes[0].offset >= end) {
      const records: [number, string[]][] = [];
      try {
        this.tokenize(piece, (line, cells) => records.push([line, cells]));
        for (const [line, cells] of records) this.take(line, cells);
        return true;
      } catch (err) {
        if (!(err instanceof CsvSyntaxError)) throw err;
      }
    }
    return this.readRecordByRecord(piece, last);
  }

  private tokenize(piece: CsvPiece, onRecord: (line: number, cells: string[]) => void): void {
    const text = piece.bytes.toString(this.settings.encoding);
    tokenizeCsv(text, piece.startLine, this.delimiter, this.settings.encoding, onRecord);
  }

  /** Skip mode: the records of a piece one by one, a record with a bad byte or that cannot be read skipped. */
  private readRecordByRecord(piece: CsvPiece, last: boolean): boolean {
    const cutter = this.cutterAt(piece.startLine, piece.startOffset, 1);
    cutter.push(piece.bytes);
    for (let one = cutter.next() ?? cutter.finish(); one !== undefined; one = cutter.next() ?? cutter.finish()) {
      const end = one.startOffset + one.bytes.length;
      const badByte = this.badBytes.length > 0 && this.badBytes[0].offset < end ? this.badBytes[0] : undefined;
      let failure: CsvSyntaxError | undefined;
      const records: [number, string[]][] = [];
      try {
        this.tokenize(one, (line, cells) => records.push([line, cells]));
      } catch (err) {
        if (!(err instanceof CsvSyntaxError)) throw err;
        failure = err;
      }
      if (failure === undefined) {
        this.dropBadBytesBefore(end);
        if (records.length === 0) continue; // empty lines only
        const [line, cells] = records[0];
        if (badByte === undefined) this.take(line, cells);
        else if (this.width < 0) throw new InputError(this.name, line, badByte.problem, badByte.hint);
        else this.bad?.skip(line, badByte.problem, this.good);
        continue;
      }
      if (this.width < 0 || this.bad === undefined) throw csvInputError(this.name, failure);
      this.bad.skip(failure.line, csvInputError(this.name, failure).problem, this.good);
      this.restartAfter(one, piece, last);
      return false;
    }
    return true;
  }

  /**
   * Reading starts again on the line after the one the bad record `one` starts on: from the bytes of `piece` and
   * the cutter's still held, or, when that line does not end within them, once it has been passed over.
   */
  private restartAfter(one: CsvPiece, piece: CsvPiece, last: boolean): void {
    const rest = this.cutter.finish();
    const held = rest === undefined ? piece.bytes : Buffer.concat([piece.bytes, rest.bytes]);
    const at = nextLineStart(held, piece.startOffset, one.startOffset);
    if (at === undefined) {
      const end = piece.startOffset + held.length;
      this.passOverLine = !last && !this.ended;
      this.dropBadBytesBefore(end);
      this.cutter = this.cutterAt(1, end);
      return;
    }
    this.dropBadBytesBefore(at);
    this.cutter = this.cutterAt(this.input.lines.lineAt(at), at);
    this.cutter.push(held.subarray(at - piece.startOffset));
    if (last || this.ended) {
      const tail = this.cutter.finish();
      if (tail !== undefined) this.read(tail, true);
      return;
    }
    for (let next = this.cutter.next(); next !== undefined; next = this.cutter.next()) {
      if (!this.read(next, false)) return;
    }
  }

  private dropBadBytesBefore(offset: number): void {
    let k = 0;
    while (k < this.badBytes.length && this.badBytes[k].offset < offset) k++;
    if (k > 0) this.badBytes.splice(0, k);
  }

  private take(line: number, record: string[]): void {
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
