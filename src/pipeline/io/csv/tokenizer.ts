/**
 * The CSV tokenizer: the records of a text made of whole records, each with the physical line it starts on.
 *
 * Its reading of CSV (the one csv-parse gives with relax_quotes, every line break a record delimiter and empty
 * lines skipped; test/pipeline/csv-pieces.test.ts holds it to csv-parse on random tables):
 * - a quote opens a quoted value only as a field's first character; anywhere else it is text (O"Brien);
 * - inside a quoted value, `""` is one quote and line breaks and delimiters are text; a quote followed by the
 *   delimiter, a line break or the end closes it;
 * - any other quote closes it too but keeps the quotes as text, and the field goes on unquoted up to the next
 *   delimiter or line break: `"a""b"x,` is the cell `"a"b"x` (the escaped quote stays one quote);
 * - LF, CRLF and a lone CR each end a record; a line of only line breaks is skipped, but `""` alone is a record
 *   of one empty cell.
 * Line numbers count LF, CRLF and a lone CR, inside quoted values too. The piece cutter (piece-cutter.ts) is the
 * first pass over the bytes: it finds where records end by the same quoting rules, so that each piece it cuts is
 * whole records for this tokenizer.
 *
 * The text is only searched, with String#indexOf, for the next quote, delimiter and line break, and cells are
 * slices of it: walking every character through a state machine would be the largest cost of a row.
 */
import { MAX_RECORD_BYTES } from '../record-limit.js';

const LF = 10;
const CR = 13;
const QUOTE = 34;

/** A record that cannot be read: a quoted value never closed, or a record longer than MAX_RECORD_BYTES. */
export class CsvSyntaxError extends Error {
  constructor(
    readonly kind: 'unclosed' | 'overlong',
    /** The line the record starts on. */
    readonly line: number,
    /** Whether the record's limit was passed inside a quoted value (a quote never closed, most likely). */
    readonly quoting: boolean,
  ) {
    super(kind === 'unclosed' ? 'a quoted value is never closed' : 'a record is too long');
    this.name = 'CsvSyntaxError';
  }
}

/**
 * Calls `onRecord` with each record of `text` (cells as they are, not fitted to a width) and the line it starts on,
 * the first line of `text` being `startLine`. `delimiter` is the delimiter as it reads in the text. Throws
 * CsvSyntaxError at the first record that cannot be read, after the records before it.
 */
export function tokenizeCsv(
  text: string,
  startLine: number,
  delimiter: string,
  encoding: 'utf8' | 'latin1',
  onRecord: (line: number, cells: string[]) => void,
): void {
  const n = text.length;
  const dl = delimiter.length;
  // a record of at most this many characters cannot be longer than the limit in bytes (3 per UTF-16 unit at most)
  const surelyShort = encoding === 'latin1' ? MAX_RECORD_BYTES : Math.floor(MAX_RECORD_BYTES / 3);
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
    const recordStart = pos;
    const recordLine = line;
    const cells: string[] = [];
    // the end of the record's last cell so far
    let end: number;
    for (;;) {
      let value: string;
      if (text.charCodeAt(pos) === QUOTE) {
        value = '';
        let from = pos + 1;
        let q: number;
        for (;;) {
          q = text.indexOf('"', from);
          if (q === -1) throw neverClosed(text, recordStart, recordLine, delimiter, encoding);
          if (text.charCodeAt(q + 1) !== QUOTE) break;
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
          // text after the closing quote: the quotes stay, and the field goes on unquoted
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
    if (end - recordStart > surelyShort && byteLength(text, recordStart, end, encoding) > MAX_RECORD_BYTES)
      throw tooLong(text, recordStart, end, recordLine, delimiter, encoding);
    onRecord(recordLine, cells);
  }
}

/** Where `search` next occurs in `text` at or after `from`, or text.length when it does not. */
function nextOf(text: string, search: string, from: number): number {
  const at = text.indexOf(search, from);
  return at === -1 ? text.length : at;
}

/** A record whose bytes, from its first to the end of its last cell, are more than MAX_RECORD_BYTES. */
function tooLong(
  text: string,
  start: number,
  end: number,
  line: number,
  delimiter: string,
  encoding: 'utf8' | 'latin1',
): CsvSyntaxError {
  return new CsvSyntaxError('overlong', line, quotedAtLimit(text, start, end, delimiter, encoding));
}

/** A quoted value that is never closed: the record runs to the end of the text, and may be too long as well. */
function neverClosed(
  text: string,
  start: number,
  line: number,
  delimiter: string,
  encoding: 'utf8' | 'latin1',
): CsvSyntaxError {
  let end = text.length;
  while (end > start && (text.charCodeAt(end - 1) === LF || text.charCodeAt(end - 1) === CR)) end--;
  if (byteLength(text, start, end, encoding) > MAX_RECORD_BYTES)
    return tooLong(text, start, end, line, delimiter, encoding);
  return new CsvSyntaxError('unclosed', line, true);
}

function byteLength(text: string, start: number, end: number, encoding: 'utf8' | 'latin1'): number {
  return encoding === 'latin1' ? end - start : Buffer.byteLength(text.slice(start, end), 'utf8');
}

/** Whether the first byte past the limit in the record from `start` to `end` is inside a quoted value. */
function quotedAtLimit(
  text: string,
  start: number,
  end: number,
  delimiter: string,
  encoding: 'utf8' | 'latin1',
): boolean {
  let bytes = 0;
  let quoted = false;
  let fieldStart = true;
  for (let i = start; i < end; i++) {
    const c = text.charCodeAt(i);
    bytes += encoding === 'latin1' || c < 0x80 ? 1 : c < 0x800 || (c >= 0xd800 && c < 0xe000) ? 2 : 3;
    if (bytes > MAX_RECORD_BYTES) return quoted;
    if (quoted) {
      if (c === QUOTE) {
        if (text.charCodeAt(i + 1) === QUOTE) i++;
        else quoted = false;
      }
      fieldStart = false;
    } else {
      quoted = fieldStart && c === QUOTE;
      fieldStart = c === LF || c === CR;
      if (text.startsWith(delimiter, i)) {
        fieldStart = true;
        i += delimiter.length - 1;
      }
    }
  }
  return quoted;
}
