import {
  ANSWER_CODE,
  BASE64_CHAR,
  RAW_UID_LENGTH,
  ScannedAnswers,
  type MapV3Answers,
  type MapV3Request,
  type MapV3ResponseBody,
} from '../protocol/index.js';
import { refreshWindow } from './answer-items.js';

/**
 * Reads a v3 map answer (the decrypted JSON) in one pass over its text, checking each item against the wire
 * contract as it goes, for the answers a service writes: compact JSON, the envelope's `status` and `body`, the
 * body's four arrays, and items `{"u":…,"p":…,"r":…}`, `{"e":"optout"}` or `{"e":"invalid identifier"}` with their
 * keys in that order. It accepts exactly what response-bodies.ts accepts for such a text and gives the same
 * answer; for anything else (whitespace, escapes, other key orders, a status other than success, a count that
 * does not match, any item the contract refuses) it gives up, and the caller reads the text the general way, which
 * is also where every refusal and its message come from. JSON.parse and a second pass over its objects cost the
 * main thread, the bound of a threaded map, about twice as much. The items go straight into packed arrays
 * (ScannedAnswers), which keep where each raw UID sits in the answer's bytes rather than a string of it.
 */

const KINDS = ['email', 'email_hash', 'phone', 'phone_hash'] as const;
type Kind = (typeof KINDS)[number];

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
const EQUALS = 61;

/** A scan position, or GAVE_UP. */
const GAVE_UP = -1;

/** The most digits of an `r` read exactly (any time in the window has 10 or 11). */
const MAX_R_DIGITS = 15;

class Scan {
  /** Where the last string read starts and ends (after its quotes). */
  start = 0;
  end = 0;
  readonly answers: Partial<Record<Kind, ScannedAnswers>> = {};

  constructor(
    readonly bytes: Buffer,
    readonly text: string,
    readonly request: MapV3Request,
    readonly minS: number,
    readonly maxS: number,
  ) {}

  /** At `at` a JSON string without escapes: its bounds go to start and end; the position after it. */
  string(at: number): number {
    const text = this.text;
    if (text.charCodeAt(at) !== QUOTE) return GAVE_UP;
    let i = at + 1;
    for (let c = text.charCodeAt(i); c !== QUOTE; c = text.charCodeAt(++i)) {
      // an escape would change what the text means (the general reader takes those); NaN is the text's end
      if (c === BACKSLASH || Number.isNaN(c)) return GAVE_UP;
    }
    this.start = at + 1;
    this.end = i;
    return i + 1;
  }

  /** `"name":` at `at`; the position after the colon. */
  key(at: number, name: string): number {
    const text = this.text;
    const end = at + name.length + 3;
    if (text.charCodeAt(at) !== QUOTE || text.charCodeAt(end - 2) !== QUOTE || text.charCodeAt(end - 1) !== COLON)
      return GAVE_UP;
    return text.startsWith(name, at + 1) ? end : GAVE_UP;
  }

  /** A raw UID string at `at` (44 base64 characters, the last one may be `=`); the position after it. */
  rawUid(at: number): number {
    const text = this.text;
    if (text.charCodeAt(at) !== QUOTE || text.charCodeAt(at + RAW_UID_LENGTH + 1) !== QUOTE) return GAVE_UP;
    const start = at + 1;
    const last = start + RAW_UID_LENGTH - 1;
    for (let i = start; i < last; i++) {
      const c = text.charCodeAt(i);
      if (c > 127 || BASE64_CHAR[c] === 0) return GAVE_UP;
    }
    const c = text.charCodeAt(last);
    if (c !== EQUALS && (c > 127 || BASE64_CHAR[c] === 0)) return GAVE_UP;
    this.start = start;
    this.end = last + 1;
    return last + 2;
  }

  /** One item at `at`, added to `into`; the position after it. */
  item(at: number, into: ScannedAnswers): number {
    const text = this.text;
    if (text.charCodeAt(at) !== OPEN_BRACE) return GAVE_UP;
    if (text.startsWith('"e":"', at + 1)) {
      if (text.startsWith('optout"}', at + 6)) {
        into.addUnmapped(ANSWER_CODE.optout);
        return at + 14;
      }
      if (text.startsWith('invalid identifier"}', at + 6)) {
        into.addUnmapped(ANSWER_CODE.invalid);
        return at + 26;
      }
      return GAVE_UP;
    }
    let i = this.key(at + 1, 'u');
    if (i < 0 || (i = this.rawUid(i)) < 0) return GAVE_UP;
    const u = this.start;
    if (text.charCodeAt(i) !== COMMA || (i = this.key(i + 1, 'p')) < 0) return GAVE_UP;
    let p: number | null = null;
    if (text.startsWith('null', i)) i += 4;
    else {
      if ((i = this.rawUid(i)) < 0) return GAVE_UP;
      p = this.start;
    }
    if (text.charCodeAt(i) !== COMMA || (i = this.key(i + 1, 'r')) < 0) return GAVE_UP;
    // whole seconds, as JSON writes an integer: no sign, fraction, exponent or leading zero
    const first = i;
    let r = 0;
    for (let c = text.charCodeAt(i); c >= ZERO && c <= NINE; c = text.charCodeAt(++i)) r = r * 10 + (c - ZERO);
    const digits = i - first;
    if (digits === 0 || digits > MAX_R_DIGITS || (digits > 1 && text.charCodeAt(first) === ZERO)) return GAVE_UP;
    if (r < this.minS || r > this.maxS || text.charCodeAt(i) !== CLOSE_BRACE) return GAVE_UP;
    into.addMapped(u, p, r);
    return i + 1;
  }

  /** The array of `kind` at `at`, as many items as were sent; the position after it. */
  array(at: number, kind: Kind): number {
    const text = this.text;
    if (text.charCodeAt(at) !== OPEN_BRACKET) return GAVE_UP;
    const sent = this.request[kind]?.length ?? 0;
    const items = new ScannedAnswers(this.bytes, sent);
    let i = at + 1;
    if (text.charCodeAt(i) !== CLOSE_BRACKET) {
      for (;;) {
        if (items.count === sent || (i = this.item(i, items)) < 0) return GAVE_UP;
        const c = text.charCodeAt(i++);
        if (c === CLOSE_BRACKET) break;
        if (c !== COMMA) return GAVE_UP;
      }
    } else i++;
    if (items.count !== sent) return GAVE_UP;
    this.answers[kind] = items;
    return i;
  }

  /** The body object at `at`: each of the four arrays once, in any order, and nothing else. */
  body(at: number): number {
    const text = this.text;
    if (text.charCodeAt(at) !== OPEN_BRACE) return GAVE_UP;
    let i = at + 1;
    for (let n = 0; n < KINDS.length; n++) {
      if (n > 0 && text.charCodeAt(i++) !== COMMA) return GAVE_UP;
      if ((i = this.string(i)) < 0 || text.charCodeAt(i++) !== COLON) return GAVE_UP;
      const kind = text.slice(this.start, this.end);
      if (!(KINDS as readonly string[]).includes(kind) || this.answers[kind as Kind] !== undefined) return GAVE_UP;
      if ((i = this.array(i, kind as Kind)) < 0) return GAVE_UP;
    }
    return text.charCodeAt(i) === CLOSE_BRACE ? i + 1 : GAVE_UP;
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
  // every byte the scan takes is ASCII, so a byte outside it fails the scan whatever character it decodes to
  const text = json.toString('latin1');
  const window = refreshWindow(nowMs);
  const scan = new Scan(json, text, request, window.minS, window.maxS);
  if (text.charCodeAt(0) !== OPEN_BRACE) return undefined;
  let i = 1;
  let status = false;
  let body = false;
  for (let n = 0; n < 2; n++) {
    if (n > 0 && text.charCodeAt(i++) !== COMMA) return undefined;
    if (text.startsWith('"status":"success"', i) && !status) {
      status = true;
      i += 18;
    } else if (text.startsWith('"body":', i) && !body) {
      body = true;
      i = scan.body(i + 7);
      if (i < 0) return undefined;
    } else return undefined;
  }
  if (text.charCodeAt(i) !== CLOSE_BRACE || i + 1 !== text.length) return undefined;
  const { answers } = scan;
  return {
    email: answers.email as ScannedAnswers,
    email_hash: answers.email_hash as ScannedAnswers,
    phone: answers.phone as ScannedAnswers,
    phone_hash: answers.phone_hash as ScannedAnswers,
  };
}
