/** A CSV input as a table: its header, and its rows read on this thread, bad records skipped when asked. */
import { nextLineStart, type BadByte, type BadRecords } from '../bad-records.js';
import type { ByteInput } from '../byte-input.js';
import { TableBase } from '../table-base.js';
import { InputError, type SourceProblemCounts } from '../table.js';
import { CsvRecords, type CsvSettings } from './csv-records.js';
import { fitRow } from './fit-row.js';
import { uniqueHeader } from './unique-header.js';

export class CsvTable extends TableBase {
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
