/** Records that cannot be read, skipped and reported one by one (`--on-bad-row skip`) instead of ending the run. */
import { isUtf8 } from 'node:buffer';
import { InputError, type BadRecord } from './table.js';

/** A byte that makes its record unreadable (a NUL, invalid UTF-8): where it is, and what to say about it. */
export interface BadByte {
  offset: number;
  problem: string;
  hint: string;
}

/** At least this many bad records, and more bad than good ones: the file is not a file with a few bad rows. */
const GIVE_UP_AFTER = 1000;

/**
 * Counts and hands on the records a source skips. Reasons never hold a cell's content (it may be an email), only
 * what is wrong. When most of what is read is bad (a binary file, a wrong encoding or delimiter), skipping would
 * only hide the real problem: the run stops with one line saying so.
 */
export class BadRecords {
  count = 0;

  constructor(
    private readonly file: string,
    private readonly onBadRecord: (bad: BadRecord) => void,
  ) {}

  /** Skips the record at `line`; `good` is how many records were read well so far. */
  skip(line: number, reason: string, good: number): void {
    this.count++;
    this.onBadRecord({ file: this.file, line, reason });
    if (this.count >= GIVE_UP_AFTER && this.count > good) {
      throw new InputError(
        this.file,
        line,
        `${this.count} of the ${this.count + good} records read so far cannot be read, so this is not a file with a few bad rows`,
        'check the --encoding, the --delimiter and the format of the file',
      );
    }
  }
}

/**
 * The bad bytes of one checked read: the first NUL or invalid UTF-8 sequence of each line (one is enough to skip
 * the record it is in), with offsets counted from `start`. `buf` starts on a character boundary.
 */
export function badBytesIn(buf: Buffer, start: number, validateUtf8: boolean, decompressed: boolean): BadByte[] {
  const out: BadByte[] = [];
  let from = 0;
  while (from < buf.length) {
    const nul = buf.indexOf(0, from);
    const rest = buf.subarray(from);
    const invalid = validateUtf8 && !isUtf8(rest) ? from + firstInvalidUtf8(rest) : -1;
    if (nul === -1 && invalid === -1) break;
    const isNul = nul !== -1 && (invalid === -1 || nul < invalid);
    const at = isNul ? nul : invalid;
    out.push(isNul ? nulByte(start + at, decompressed) : invalidUtf8(start + at));
    const lf = buf.indexOf(10, at);
    if (lf === -1) break;
    from = lf + 1;
  }
  return out;
}

export function nulByte(offset: number, decompressed: boolean): BadByte {
  return {
    offset,
    problem: decompressed
      ? 'NUL byte in the decompressed data (a gzip of a binary file, not of text?)'
      : 'NUL byte (a binary or UTF-16 file?)',
    hint: 'save it as UTF-8 text (in Excel: "CSV UTF-8")',
  };
}

export function invalidUtf8(offset: number, problem = 'invalid UTF-8'): BadByte {
  return { offset, problem, hint: 'if the file is Latin-1 / Windows-1252, add --encoding latin1' };
}

/** Offset of the first byte that breaks UTF-8; only called once isUtf8 said there is one. */
export function firstInvalidUtf8(buf: Buffer): number {
  let i = 0;
  while (i < buf.length) {
    const b = buf[i];
    const need =
      b < 0x80 ? 0 : b >= 0xc2 && b <= 0xdf ? 1 : b >= 0xe0 && b <= 0xef ? 2 : b >= 0xf0 && b <= 0xf4 ? 3 : -1;
    if (need < 0) return i;
    for (let k = 1; k <= need; k++) {
      if (i + k >= buf.length || (buf[i + k] & 0xc0) !== 0x80) return i;
    }
    // overlongs and surrogates are invalid too; checking the second byte's range catches them
    const b1 = buf[i + 1];
    if (
      (b === 0xe0 && b1 < 0xa0) ||
      (b === 0xed && b1 > 0x9f) ||
      (b === 0xf0 && b1 < 0x90) ||
      (b === 0xf4 && b1 > 0x8f)
    )
      return i;
    i += need + 1;
  }
  return 0;
}

/**
 * Where reading can start again after a record that cannot be parsed, which starts at or after `from` in `bytes`
 * (whose first byte is at offset `base`): past the empty lines before it (when `pastEmptyLines`: `from` is where
 * the record or the empty lines before it start, not inside its line) and the end of its first line (LF, CRLF or
 * a lone CR). undefined when that line does not end within `bytes`.
 */
export function nextLineStart(bytes: Buffer, base: number, from: number, pastEmptyLines = true): number | undefined {
  let i = from - base;
  if (pastEmptyLines) while (i < bytes.length && (bytes[i] === 10 || bytes[i] === 13)) i++;
  const lf = bytes.indexOf(10, i);
  const cr = bytes.indexOf(13, i);
  if (lf === -1 && cr === -1) return undefined;
  if (cr !== -1 && (lf === -1 || cr < lf)) {
    // a CR that ends `bytes`: a LF after it, in the next read, is then read as an empty line, which is skipped
    return base + cr + (bytes[cr + 1] === 10 ? 2 : 1);
  }
  return base + lf + 1;
}
