/** The rows of a record-aligned CSV piece split as text, and the plain lines of a piece without a quote. */
import { MAX_RECORD_BYTES } from '../record-limit.js';
import type { InputRow, SourceProblemCounts } from '../table.js';
import { fitRow } from './fit-row.js';

const QUOTE = 0x22;

/**
 * A piece this module can split as text, exactly as csv-parse splits its bytes: no record in it can exceed the
 * longest allowed (so csv-parse could not fail on that), no NUL (csv-parse takes a NUL after a closing quote for
 * the end of the input), and a delimiter that is the same character once decoded (in latin1 a delimiter outside
 * Latin-1 is truncated to one byte, which csv-parse then matches as that byte).
 */
export function isSplittablePiece(
  bytes: Buffer,
  settings: { delimiter: string; encoding: 'utf8' | 'latin1' },
): boolean {
  return bytes.length <= MAX_RECORD_BYTES && bytes.indexOf(0) === -1 && delimiterSurvives(settings);
}

function delimiterSurvives(settings: { delimiter: string; encoding: 'utf8' | 'latin1' }): boolean {
  return (
    settings.encoding === 'utf8' || Buffer.from(settings.delimiter, 'latin1').toString('latin1') === settings.delimiter
  );
}

/**
 * The records of a piece without a quote as lines of text (empty lines skipped, as parsing skips them), or
 * undefined when the piece has a quote. With ',' as the delimiter such a line is already the CSV text of its cells.
 */
export function plainPieceLines(piece: Uint8Array, encoding: 'utf8' | 'latin1'): string[] | undefined {
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
