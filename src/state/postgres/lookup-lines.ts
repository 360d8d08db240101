/** Reads the lines a lookup's statement sends back: each entry found, at its key's position, its checksum checked. */
import type { DiiType } from '../../identity/index.js';
import type { StateRecord } from '../backend.js';
import { ChecksumError } from '../checksum.js';
import { STATUS_CODE } from '../schema.js';
import type { EntryStatus, StoredEntries } from '../types.js';
import { entrySumOf, type TextsAt } from './schema.js';
import { RAW_UID_BYTES, textOfSent } from './stored-bytes.js';

/** Ends a line: a byte that neither numbers nor base64 hold, and that a bucket id holds only escaped. */
export const LINE_END = '\u0001';
/** A raw UID column that is null (no base64 holds it). */
export const NULL_BYTES = '-';

const [END, COMMA, MINUS, ZERO] = [1, 44, 45, 48];
const STATUS_OF_CODE = new Map(Object.entries(STATUS_CODE).map(([status, code]) => [code, status as EntryStatus]));
// the line being read: where its next field starts, the byte that ended the last one (-1: the bytes ended), and
// how many of its fields ended at no comma
let pos = 0;
let last = -1;
let breaks = 0;
let text = '';

/**
 * Adds the entries of a lookup's lines to `out`, each at the position its key is answered at (`atOf`, by the key's
 * ordinal). `lines` are the bytes the server sent: per entry its key's ordinal, status, due, r, last mapped, last
 * opt-out check, opted out since, checksum, id, raw UID and previous raw UID (base64, or NULL_BYTES), then its
 * bucket id (backslashes and LINE_END escaped) after a comma when it has one. `hashTexts` holds the hashes asked
 * as ASCII, 44 bytes each in ordinal order (null when they are not all of that form), where their checksums read
 * them. A line that fails its checksum, is cut short or holds an unknown status throws ChecksumError.
 */
export function readLookupLines(
  lines: Buffer,
  hashTexts: Buffer | null,
  type: DiiType,
  hashes: readonly string[],
  atOf: Int32Array,
  out: StoredEntries,
): void {
  const texts: TextsAt = { hashes: hashTexts ?? lines, hash: -1, line: lines, u: -1, p: -1 };
  // the raw UIDs are cut from one text of the lines, a character a byte: one call to make it, not one a raw UID
  text = lines.toString('latin1');
  for (pos = 0; pos < lines.length; ) {
    breaks = 0;
    const ordinal = numberField(lines) as number;
    const status = STATUS_OF_CODE.get(numberField(lines) as number);
    const due = numberField(lines) === 1;
    const r = numberField(lines);
    const lastMappedS = numberField(lines);
    const lastOptoutCheckS = numberField(lines);
    const optedOutSinceMs = numberField(lines);
    const sum = numberField(lines);
    const id = pos;
    numberField(lines);
    const u = rawUidField(lines, texts, 'u');
    // every field so far ended at a comma: none was cut short, the next read from another line
    const whole = breaks === 0;
    const p = rawUidField(lines, texts, 'p');
    const bucketId = last === COMMA ? bucketIdField(lines) : null;
    const at = atOf[ordinal - 1];
    if (!whole || at === undefined || status === undefined) throw new ChecksumError("a lookup's line");
    texts.hash = hashTexts === null ? -1 : 44 * (ordinal - 1);
    const rec: StateRecord = {
      type,
      hash: hashes[at],
      status,
      due,
      u,
      p,
      r,
      bucketId,
      lastMappedS,
      lastOptoutCheckS,
      optedOutSinceMs,
    };
    if (entrySumOf(rec, texts) !== sum) {
      throw new ChecksumError(`entry ${lines.toString('latin1', id, fieldEnd(lines, id))}`);
    }
    const k = out.u.length;
    out.at[k] = at;
    out.status[k] = STATUS_CODE[status];
    out.due[k] = due ? 1 : 0;
    out.r[k] = r ?? Number.NaN;
    out.u.push(u);
    out.p.push(p);
    out.bucketId.push(bucketId);
  }
}

/** Whether b[i] ends a field: a comma, LINE_END, or the end of the bytes. */
function endsField(b: Buffer, i: number): boolean {
  return i >= b.length || b[i] === COMMA || b[i] === END;
}

/** Where the field holding b[i] ends. */
function fieldEnd(b: Buffer, i: number): number {
  while (!endsField(b, i)) i++;
  return i;
}

/** Moves past the field ending at b[end]. */
function next(b: Buffer, end: number): void {
  last = end < b.length ? b[end] : -1;
  if (last !== COMMA) breaks++;
  pos = end + 1;
}

/**
 * The number of the field at pos as Number reads its text, null when empty: digits (and a minus) read here while
 * the field's end is found, any other spelling (a fraction, an exponent, NaN, the infinities, more digits than a
 * double holds exactly) by Number.
 */
function numberField(b: Buffer): number | null {
  const from = pos;
  const first = b[from] === MINUS ? from + 1 : from;
  let i = first;
  let v = 0;
  for (let d = b[i] - ZERO; d >= 0 && d <= 9; d = b[++i] - ZERO) v = v * 10 + d;
  if (i > first && i - from <= 15 && endsField(b, i)) {
    next(b, i);
    return first > from ? -v : v;
  }
  const end = fieldEnd(b, i);
  next(b, end);
  return end === from ? null : Number(b.toString('latin1', from, end));
}

/**
 * The raw UID of the base64 field at pos (null for NULL_BYTES), noting in `texts` where its text lies when it is
 * those bytes themselves (textOfSent gives back the base64 itself: bytes of a usual size).
 */
function rawUidField(b: Buffer, texts: TextsAt, which: 'u' | 'p'): string | null {
  const from = pos;
  const end = fieldEnd(b, from);
  next(b, end);
  texts[which] = -1;
  if (end - from === 1 && b[from] === MINUS) return null;
  const sent = text.slice(from, end);
  const rawUid = textOfSent(sent, RAW_UID_BYTES);
  if (rawUid === sent) texts[which] = from;
  return rawUid;
}

/** The bucket id at pos, the rest of the line, as the line escapes it: a backslash then the character, '1' for LINE_END. */
function bucketIdField(b: Buffer): string {
  const from = pos;
  let end = from;
  while (end < b.length && b[end] !== END) end++;
  next(b, end);
  const id = b.toString('utf8', from, end);
  return !id.includes('\\') ? id : id.replace(/\\(.)/gs, (_, c: string) => (c === '1' ? LINE_END : c));
}
