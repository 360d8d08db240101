import {
  ANSWER_CODE,
  BASE64_CHAR,
  RAW_UID_LENGTH,
  ScannedAnswers,
  type MapV3Answers,
  type MapV3Request,
  type MapV3ResponseBody,
  sentCount,
} from '../protocol/index.js';
import { refreshWindow } from './answer-items.js';

/**
 * Reads a v3 map answer (the decrypted JSON) in one pass over its bytes, checking each item against the wire
 * contract as it goes, for the answers a service writes: compact JSON, the envelope's `status` and `body`, the
 * body's four arrays, and items `{"u":…,"p":…,"r":…}`, `{"e":"optout"}` or `{"e":"invalid identifier"}` with their
 * keys in that order. It accepts exactly what response-bodies.ts accepts for such a text and gives the same
 * answer; for anything else (whitespace, escapes, other key orders, a status other than success, a count that
 * does not match, any item the contract refuses) it gives up, and the caller reads the text the general way, which
 * is also where every refusal and its message come from. JSON.parse and a second pass over its objects cost the
 * main thread, the bound of a threaded map, about twice as much. The items go straight into packed arrays
 * (ScannedAnswers), which keep where each raw UID sits in the answer's bytes rather than a string of it. The
 * bytes are read as they are, not decoded into a string first: that string (as large as the answer) would be one
 * more copy per answer for the main thread to make and collect, and its character reads cost more than byte reads.
 */

const KINDS = ['email', 'email_hash', 'phone', 'phone_hash'] as const;
type Kind = (typeof KINDS)[number];

/** The bytes of an ASCII text. */
function ascii(text: string): Uint8Array {
  return Uint8Array.from(text, (c) => c.charCodeAt(0));
}

const KIND_BYTES = KINDS.map(ascii);
const STATUS_SUCCESS = ascii('"status":"success"');
const BODY_KEY = ascii('"body":');
const E_KEY = ascii('"e":"');
const OPTOUT_END = ascii('optout"}');
const INVALID_END = ascii('invalid identifier"}');
const NULL = ascii('null');
/** The one-letter keys of a mapped item. */
const U = 117;
const P = 112;
const R = 114;

/** 1 for the bytes of base64's alphabet, 0 for every other byte value (a table of all 256, so none is out of it). */
const UID_CHAR = new Uint8Array(256);
UID_CHAR.set(BASE64_CHAR);

/**
 * 1 for two bytes (the first in the low byte) that are both base64's, 0 for any other pair: a raw UID is checked
 * a word at a time, two lookups per four bytes, where a lookup per byte costs about twice as much.
 */
const UID_PAIR = new Uint8Array(65536);
const EQUALS = 61;
/** UID_PAIR for a raw UID's last two bytes, of which the second may also be `=`. */
const UID_LAST_PAIR = new Uint8Array(65536);
for (let a = 0; a < 256; a++)
  for (let b = 0; b < 256; b++) {
    if (UID_CHAR[a] === 0) continue;
    UID_PAIR[a | (b << 8)] = UID_CHAR[b];
    UID_LAST_PAIR[a | (b << 8)] = b === EQUALS ? 1 : UID_CHAR[b];
  }

const QUOTE = 34;
const BACKSLASH = 92;
const COMMA = 44;
const COLON = 58;
const OPEN_BRACE = 123;
const CLOSE_BRACE = 125;
const OPEN_BRACKET = 91;
const CLOSE_BRACKET = 93;
const ZERO = 48;
const NINE = 57;

/** A scan position, or GAVE_UP. */
const GAVE_UP = -1;

/** The most digits of an `r` read exactly (any time in the window has 10 or 11). */
const MAX_R_DIGITS = 15;

/**
 * The scan reads the answer's bytes as they are: every byte it takes is ASCII, and any other byte fails it. A byte
 * read past the end is undefined, which equals no byte the scan looks for, so the end fails it the same way.
 */
class Scan {
  /** Where the last string read starts and ends (after its quotes). */
  start = 0;
  end = 0;
  readonly answers: Partial<Record<Kind, ScannedAnswers>> = {};
  /** The bytes, read a word at a time (rawUid). */
  private readonly view: DataView;

  constructor(
    readonly bytes: Buffer,
    readonly request: MapV3Request,
    readonly minS: number,
    readonly maxS: number,
  ) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  /** Whether the bytes at `at` are `expected`. */
  has(at: number, expected: Uint8Array): boolean {
    const bytes = this.bytes;
    if (at + expected.length > bytes.length) return false;
    for (let k = 0; k < expected.length; k++) if (bytes[at + k] !== expected[k]) return false;
    return true;
  }

  /** At `at` a JSON string without escapes: its bounds go to start and end; the position after it. */
  string(at: number): number {
    const bytes = this.bytes;
    if (bytes[at] !== QUOTE) return GAVE_UP;
    const length = bytes.length;
    let i = at + 1;
    for (let c = bytes[i]; c !== QUOTE; c = bytes[++i]) {
      // an escape would change what the text means (the general reader takes those)
      if (c === BACKSLASH || i >= length) return GAVE_UP;
    }
    this.start = at + 1;
    this.end = i;
    return i + 1;
  }

  /** `"name":` at `at`, name one byte; the position after the colon. */
  key(at: number, name: number): number {
    const bytes = this.bytes;
    if (bytes[at] !== QUOTE || bytes[at + 1] !== name || bytes[at + 2] !== QUOTE || bytes[at + 3] !== COLON)
      return GAVE_UP;
    return at + 4;
  }

  /** A raw UID string at `at` (44 base64 characters, the last one may be `=`); the position after it. */
  rawUid(at: number): number {
    const bytes = this.bytes;
    if (bytes[at] !== QUOTE || bytes[at + RAW_UID_LENGTH + 1] !== QUOTE) return GAVE_UP;
    // the closing quote is there, so every word of the raw UID is within the bytes
    const view = this.view;
    const start = at + 1;
    const last = start + RAW_UID_LENGTH - 4;
    for (let i = start; i < last; i += 4) {
      const w = view.getUint32(i, true);
      if ((UID_PAIR[w & 0xffff] & UID_PAIR[w >>> 16]) === 0) return GAVE_UP;
    }
    const w = view.getUint32(last, true);
    if ((UID_PAIR[w & 0xffff] & UID_LAST_PAIR[w >>> 16]) === 0) return GAVE_UP;
    this.start = start;
    this.end = start + RAW_UID_LENGTH;
    return start + RAW_UID_LENGTH + 1;
  }

  /** One item at `at`, added to `into`; the position after it. */
  item(at: number, into: ScannedAnswers): number {
    const bytes = this.bytes;
    if (bytes[at] !== OPEN_BRACE) return GAVE_UP;
    if (this.has(at + 1, E_KEY)) {
      if (this.has(at + 6, OPTOUT_END)) {
        into.addUnmapped(ANSWER_CODE.optout);
        return at + 14;
      }
      if (this.has(at + 6, INVALID_END)) {
        into.addUnmapped(ANSWER_CODE.invalid);
        return at + 26;
      }
      return GAVE_UP;
    }
    let i = this.key(at + 1, U);
    if (i < 0 || (i = this.rawUid(i)) < 0) return GAVE_UP;
    const u = this.start;
    if (bytes[i] !== COMMA || (i = this.key(i + 1, P)) < 0) return GAVE_UP;
    let p: number | null = null;
    if (this.has(i, NULL)) i += 4;
    else {
      if ((i = this.rawUid(i)) < 0) return GAVE_UP;
      p = this.start;
    }
    if (bytes[i] !== COMMA || (i = this.key(i + 1, R)) < 0) return GAVE_UP;
    // whole seconds, as JSON writes an integer: no sign, fraction, exponent or leading zero
    const first = i;
    let r = 0;
    for (let c = bytes[i]; c >= ZERO && c <= NINE; c = bytes[++i]) r = r * 10 + (c - ZERO);
    const digits = i - first;
    if (digits === 0 || digits > MAX_R_DIGITS || (digits > 1 && bytes[first] === ZERO)) return GAVE_UP;
    if (r < this.minS || r > this.maxS || bytes[i] !== CLOSE_BRACE) return GAVE_UP;
    into.addMapped(u, p, r);
    return i + 1;
  }

  /** The array of `kind` at `at`, as many items as were sent; the position after it. */
  array(at: number, kind: Kind): number {
    const bytes = this.bytes;
    if (bytes[at] !== OPEN_BRACKET) return GAVE_UP;
    const sent = sentCount(this.request, kind);
    const items = new ScannedAnswers(bytes, sent);
    let i = at + 1;
    if (bytes[i] !== CLOSE_BRACKET) {
      for (;;) {
        if (items.count === sent || (i = this.item(i, items)) < 0) return GAVE_UP;
        const c = bytes[i++];
        if (c === CLOSE_BRACKET) break;
        if (c !== COMMA) return GAVE_UP;
      }
    } else i++;
    if (items.count !== sent) return GAVE_UP;
    this.answers[kind] = items;
    return i;
  }

  /** The kind named by the string last read, or undefined. */
  kindRead(): Kind | undefined {
    for (let k = 0; k < KINDS.length; k++)
      if (this.end - this.start === KIND_BYTES[k].length && this.has(this.start, KIND_BYTES[k])) return KINDS[k];
    return undefined;
  }

  /** The body object at `at`: each of the four arrays once, in any order, and nothing else. */
  body(at: number): number {
    const bytes = this.bytes;
    if (bytes[at] !== OPEN_BRACE) return GAVE_UP;
    let i = at + 1;
    for (let n = 0; n < KINDS.length; n++) {
      if (n > 0 && bytes[i++] !== COMMA) return GAVE_UP;
      if ((i = this.string(i)) < 0 || bytes[i++] !== COLON) return GAVE_UP;
      const kind = this.kindRead();
      if (kind === undefined || this.answers[kind] !== undefined) return GAVE_UP;
      if ((i = this.array(i, kind)) < 0) return GAVE_UP;
    }
    return bytes[i] === CLOSE_BRACE ? i + 1 : GAVE_UP;
  }
}

/**
 * The answer's body when the text has the usual shape and every item keeps the contract; undefined otherwise
 * (read it with readResponseJson and readMapV3Body, which give the answer or the error).
 */
export function scanMapV3Answer(json: Buffer, request: MapV3Request, nowMs: number): MapV3ResponseBody | undefined {
  const answers = scanMapV3Answers(json, request, nowMs);
  if (answers === undefined) return undefined;
  return {
    email: (answers.email as ScannedAnswers).items(),
    email_hash: (answers.email_hash as ScannedAnswers).items(),
    phone: (answers.phone as ScannedAnswers).items(),
    phone_hash: (answers.phone_hash as ScannedAnswers).items(),
  };
}

/** scanMapV3Answer with the items left packed, as the answer's bytes and typed arrays. */
export function scanMapV3Answers(json: Buffer, request: MapV3Request, nowMs: number): MapV3Answers | undefined {
  const window = refreshWindow(nowMs);
  const scan = new Scan(json, request, window.minS, window.maxS);
  if (json[0] !== OPEN_BRACE) return undefined;
  let i = 1;
  let status = false;
  let body = false;
  for (let n = 0; n < 2; n++) {
    if (n > 0 && json[i++] !== COMMA) return undefined;
    if (scan.has(i, STATUS_SUCCESS) && !status) {
      status = true;
      i += STATUS_SUCCESS.length;
    } else if (scan.has(i, BODY_KEY) && !body) {
      body = true;
      i = scan.body(i + BODY_KEY.length);
      if (i < 0) return undefined;
    } else return undefined;
  }
  if (json[i] !== CLOSE_BRACE || i + 1 !== json.length) return undefined;
  const { answers } = scan;
  return {
    email: answers.email as ScannedAnswers,
    email_hash: answers.email_hash as ScannedAnswers,
    phone: answers.phone as ScannedAnswers,
    phone_hash: answers.phone_hash as ScannedAnswers,
  };
}
