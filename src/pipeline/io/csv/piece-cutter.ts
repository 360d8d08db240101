/**
 * Cuts CSV input bytes into pieces that each end at a record boundary, so that the tokenizer (tokenizer.ts) can
 * read every piece on its own, on this thread or in a row thread, and the records of all pieces, in order, are
 * the records of the whole input. It is the tokenizer's first pass, over bytes, by the same quoting rules, which
 * come down to two states:
 * - outside a quoted value, a `"` opens one only at the start of a field (the input's or a piece's first byte,
 *   or right after the delimiter or a line break); anywhere else it is literal text (O"Brien);
 * - inside a quoted value, `""` is an escaped quote and line breaks are text; any other `"` ends the value
 *   (followed by something other than the delimiter or a line break, the field goes on unquoted: `"ab"cd`), so
 *   either way the cutter is outside a quoted value after that quote.
 * Every LF, CR or CRLF outside a quoted value ends a record (or an empty line): that is where pieces are cut. A
 * quote that is never closed stops all cutting, so the last piece holds it and the tokenizer reports it.
 *
 * The main thread sees every byte of very large files here: the bytes are only ever searched with Buffer#indexOf
 * (native memchr), never walked byte by byte, and each buffer is searched at most once per byte class (quote,
 * LF, CR) while a piece is looked for.
 */

const LF = 10;
const CR = 13;
const QUOTE = 34;

export interface CsvPiece {
  /** Bytes of whole records (and the empty lines among them); never cut inside a quoted value or a CRLF.
   *  A copy that owns its whole ArrayBuffer, so it can be transferred to a worker. */
  bytes: Buffer;
  /** 1-based physical line number of the piece's first byte in the whole input. */
  startLine: number;
  /** Byte offset of the piece's first byte in the whole input (as pushed). */
  startOffset: number;
}

export class CsvPieceCutter {
  private readonly delimiter: Buffer;
  private readonly target: number;
  /** Pushed buffers not yet wholly taken (from `headIdx` on), and the input offset each starts at. */
  private bufs: Buffer[] = [];
  private starts: number[] = [];
  private pushed = 0;
  /** The first byte not yet taken: its buffer, its position there, its input offset and its line. */
  private headIdx = 0;
  private headPos = 0;
  private headOffset = 0;
  private headLine = 1;
  /** How far the quote state is known: the buffer and position of the scan, and whether that is inside a quoted value. */
  private scanIdx = 0;
  private scanPos = 0;
  private quoted = false;
  /** The earliest offset a line break must start at for the search the scan was last made for. */
  private scanFrom = 0;
  /** Next quote, LF and CR at or after the last search start in the scan's buffer (its length: none; -1: not searched). */
  private nextQuote = -1;
  private nextLf = -1;
  private nextCr = -1;
  private finished = false;

  /**
   * `delimiter` and `encoding`: the input's, as settled (csv/delimiter.ts checked the delimiter); the encoding is
   * how the delimiter is turned into bytes (latin1 '§' is one byte). `start`: where in the input the first byte
   * pushed is, when cutting starts again further down (after a bad record).
   */
  constructor(
    delimiter: string,
    targetBytes: number,
    encoding: 'utf8' | 'latin1',
    start: { line: number; offset: number } = { line: 1, offset: 0 },
  ) {
    if (!Number.isInteger(targetBytes) || targetBytes < 1) {
      throw new Error(`CsvPieceCutter: targetBytes must be a positive integer, got ${targetBytes}`);
    }
    this.delimiter = Buffer.from(delimiter, encoding);
    this.target = targetBytes;
    this.pushed = start.offset;
    this.headOffset = start.offset;
    this.scanFrom = start.offset;
    this.headLine = start.line;
  }

  /** Bytes held that no piece has taken yet (a quote never closed makes this grow: the caller bounds it). */
  get pendingBytes(): number {
    return this.pushed - this.headOffset;
  }

  /** The cutter keeps `buf` (not a copy) until its bytes are taken: the caller must not reuse it. */
  push(buf: Buffer): void {
    if (this.finished) throw new Error('CsvPieceCutter: push after finish');
    if (buf.length === 0) return;
    this.bufs.push(buf);
    this.starts.push(this.pushed);
    this.pushed += buf.length;
  }

  next(): CsvPiece | undefined {
    if (this.finished) return undefined;
    const end = this.findBoundary(this.headOffset + this.target - 1);
    return end < 0 ? undefined : this.take(end);
  }

  nextRecord(): CsvPiece | undefined {
    if (this.finished) return undefined;
    const recordStart = this.firstNonBreak();
    if (recordStart < 0) return undefined;
    const end = this.findBoundary(recordStart);
    return end < 0 ? undefined : this.take(end);
  }

  finish(): CsvPiece | undefined {
    if (this.finished) return undefined;
    const piece = this.pushed > this.headOffset ? this.take(this.pushed) : undefined;
    this.finished = true;
    this.bufs = [];
    this.starts = [];
    return piece;
  }

  /**
   * The input offset just past the first line break outside a quoted value that starts at or after `from`
   * (the end of the record or empty line it closes), or -1 if the pushed bytes do not show one yet.
   */
  private findBoundary(from: number): number {
    if (from < this.scanFrom) {
      // the scan went past breaks before the last search's start unchecked, and the cached LF/CR lie beyond it
      if (this.starts[this.scanIdx] + this.scanPos > from) this.rescanFromHead();
      this.nextLf = -1;
      this.nextCr = -1;
    }
    this.scanFrom = from;
    const bufs = this.bufs;
    let i = this.scanIdx;
    let p = this.scanPos;
    while (i < bufs.length) {
      const buf = bufs[i];
      const len = buf.length;
      const base = this.starts[i];
      for (;;) {
        if (this.nextQuote < p) this.nextQuote = nearIndexOrLength(buf, QUOTE, p);
        const q = this.nextQuote;
        if (!this.quoted) {
          const s = Math.max(p, from - base);
          if (s < q) {
            if (this.nextLf < s) this.nextLf = indexOrLength(buf, LF, s);
            if (this.nextCr < s) this.nextCr = indexOrLength(buf, CR, s);
            if (this.nextLf < q || this.nextCr < q) return this.breakEnd(i, Math.min(this.nextLf, this.nextCr));
          }
          if (q === len) break;
          this.quoted = this.opensQuotedValue(i, q);
          p = q + 1;
        } else {
          if (q === len) break;
          const after = q + 1 < len ? buf[q + 1] : i + 1 < bufs.length ? bufs[i + 1][0] : -1;
          if (after === -1) {
            // whether this quote is escaped or closing shows only in the next push
            this.scanIdx = i;
            this.scanPos = q;
            return -1;
          }
          if (after === QUOTE) {
            p = q + 2;
          } else {
            this.quoted = false;
            p = q + 1;
          }
        }
      }
      if (i + 1 === bufs.length) {
        this.scanIdx = i;
        this.scanPos = p;
        return -1;
      }
      // an escaped quote may straddle two pushes: its second byte is then the next buffer's first
      p = Math.max(0, p - len);
      i++;
      this.resetSearches();
    }
    return -1;
  }

  /** Where the line break at `t` in buffer `i` ends (CRLF is one); -1 if that hangs on bytes not pushed yet. */
  private breakEnd(i: number, t: number): number {
    const buf = this.bufs[i];
    if (buf[t] === LF || t + 1 < buf.length) {
      const end = buf[t] === CR && buf[t + 1] === LF ? t + 2 : t + 1;
      this.scanIdx = i;
      this.scanPos = end;
      return this.starts[i] + end;
    }
    // a CR ending this buffer: a CRLF or a lone CR, as the next buffer tells
    if (i + 1 === this.bufs.length) {
      this.scanIdx = i;
      this.scanPos = t;
      return -1;
    }
    const next = this.bufs[i + 1];
    this.scanIdx = i + 1;
    this.scanPos = next[0] === LF ? 1 : 0;
    this.resetSearches();
    return this.starts[i + 1] + this.scanPos;
  }

  /** A quote outside a quoted value opens one only at the start of a field. */
  private opensQuotedValue(i: number, q: number): boolean {
    const offset = this.starts[i] + q;
    if (offset === this.headOffset) return true; // pieces start at record boundaries
    const d = this.delimiter;
    if (q > 0 && d.length === 1) {
      // the common case, without reaching into earlier buffers
      const before = this.bufs[i][q - 1];
      return before === d[0] || before === LF || before === CR;
    }
    const before = this.byteAt(i, q - 1);
    if (before === LF || before === CR) return true;
    if (offset - d.length < this.headOffset) return false;
    for (let k = 1; k <= d.length; k++) {
      if (this.byteAt(i, q - k) !== d[d.length - k]) return false;
    }
    return true;
  }

  /** The byte at position `pos` of buffer `i`, where a negative `pos` reaches back into earlier buffers. */
  private byteAt(i: number, pos: number): number {
    while (pos < 0) {
      i--;
      pos += this.bufs[i].length;
    }
    return this.bufs[i][pos];
  }

  /** Offset of the first byte not taken that is not part of a line break (leading empty lines), or -1. */
  private firstNonBreak(): number {
    for (let i = this.headIdx; i < this.bufs.length; i++) {
      const buf = this.bufs[i];
      for (let p = i === this.headIdx ? this.headPos : 0; p < buf.length; p++) {
        if (buf[p] !== LF && buf[p] !== CR) return this.starts[i] + p;
      }
    }
    return -1;
  }

  private rescanFromHead(): void {
    this.scanIdx = this.headIdx;
    this.scanPos = this.headPos;
    this.quoted = false;
    this.resetSearches();
  }

  private resetSearches(): void {
    this.nextQuote = -1;
    this.nextLf = -1;
    this.nextCr = -1;
  }

  /** Takes the bytes from the head up to input offset `end` (at most one copy). */
  private take(end: number): CsvPiece {
    const size = end - this.headOffset;
    const bytes = Buffer.allocUnsafeSlow(size);
    let written = 0;
    let i = this.headIdx;
    let p = this.headPos;
    while (written < size) {
      const buf = this.bufs[i];
      const n = Math.min(buf.length - p, size - written);
      buf.copy(bytes, written, p, p + n);
      written += n;
      p += n;
      if (p === buf.length && written < size) {
        i++;
        p = 0;
      }
    }
    const piece: CsvPiece = { bytes, startLine: this.headLine, startOffset: this.headOffset };
    this.headLine += countLineBreaks(bytes);
    this.headOffset = end;
    if (p === this.bufs[i].length && i + 1 < this.bufs.length) {
      i++;
      p = 0;
    }
    this.headIdx = i;
    this.headPos = p;
    this.dropTaken();
    return piece;
  }

  /** Lets go of wholly taken buffers, in batches so the arrays are not shifted on every piece. */
  private dropTaken(): void {
    const drop = this.headIdx;
    if (drop < 32) return;
    this.bufs.splice(0, drop);
    this.starts.splice(0, drop);
    this.headIdx = 0;
    if (this.scanIdx >= drop) {
      this.scanIdx -= drop;
    } else {
      this.rescanFromHead();
    }
  }
}

/** How far nearIndexOrLength looks byte by byte before it asks indexOf. */
const NEAR_BYTES = 24;

/**
 * indexOrLength for a byte that is often close (a quote in a file that quotes every field): a few bytes are
 * looked at here first, as each indexOf call has a fixed cost well above a short loop's.
 */
function nearIndexOrLength(buf: Buffer, byte: number, from: number): number {
  const end = Math.min(buf.length, from + NEAR_BYTES);
  for (let at = from; at < end; at++) if (buf[at] === byte) return at;
  return indexOrLength(buf, byte, end);
}

function indexOrLength(buf: Buffer, byte: number, from: number): number {
  const at = from < buf.length ? buf.indexOf(byte, from) : -1;
  return at < 0 ? buf.length : at;
}

/**
 * What `cutter` cuts of an input, its bytes read only as far as needed: one record at a time while `oneRecord()`
 * says so (a header, or with --no-header the row that sets the width), otherwise pieces of about the cutter's
 * target size, and at the end what is left. `afterRead` sees the cutter after each read (to refuse a record that
 * never ends). A caller that stops early leaves the rest unread.
 */
export async function* cutPieces(
  cutter: CsvPieceCutter,
  read: () => Promise<Buffer | undefined>,
  oneRecord: () => boolean,
  afterRead?: () => void,
): AsyncGenerator<CsvPiece, void, undefined> {
  for (;;) {
    const piece = oneRecord() ? cutter.nextRecord() : cutter.next();
    if (piece !== undefined) {
      yield piece;
      continue;
    }
    const buf = await read();
    if (buf !== undefined) {
      cutter.push(buf);
      afterRead?.();
      continue;
    }
    const last = cutter.finish();
    if (last !== undefined) yield last;
    return;
  }
}

/**
 * Physical lines ended in `bytes`: each LF, and each CR not followed by LF (a CRLF is one). A CR ending the
 * bytes counts: pieces never end between the CR and LF of a CRLF.
 */
export function countLineBreaks(bytes: Buffer): number {
  let n = 0;
  for (let at = bytes.indexOf(LF); at !== -1; at = bytes.indexOf(LF, at + 1)) n++;
  for (let at = bytes.indexOf(CR); at !== -1; at = bytes.indexOf(CR, at + 1)) {
    if (bytes[at + 1] !== LF) n++;
  }
  return n;
}
