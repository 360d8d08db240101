/** A JSON Lines input as a table: one object per line, the first chunk's keys as the header. */
import type { BadRecords, BadByte } from '../bad-records.js';
import type { ByteInput } from '../byte-input.js';
import { MAX_RECORD_BYTES } from '../record-limit.js';
import { TableBase } from '../table-base.js';
import { InputError, type InputRow, type RowProblem, type SourceProblemCounts } from '../table.js';
import { cellText, MAX_JSON_DEPTH, nestedDeeperThan, type JsonValue } from './json-cells.js';

interface JsonRecord {
  line: number;
  object: Record<string, JsonValue>;
}

export class JsonlTable extends TableBase {
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
