import { RAW_UID_LENGTH } from './raw-uid.js';
import type { MapV3Item } from './wire.js';

/** What became of one item of a v3 map answer. The numbers are the map engine's slot statuses for the same. */
export const ANSWER_CODE = { mapped: 1, optout: 2, invalid: 3 } as const;
export type AnswerCode = (typeof ANSWER_CODE)[keyof typeof ANSWER_CODE];

/** Set in `p` when an item has no previous raw UID. */
const NO_P = -1;

/** One answer object per unmapped reason, shared: nothing changes an answer once read. */
export const OPTOUT_ITEM: MapV3Item = Object.freeze({ e: 'optout' });
export const INVALID_ITEM: MapV3Item = Object.freeze({ e: 'invalid identifier' });

/**
 * The items of one array of a v3 map answer, packed: a code, an `r` and where the raw UIDs sit in the answer's
 * own bytes, per item, instead of an object and two strings per item. A run holds the answers it remembers (for
 * repeats) and those of rows waiting to be written long enough for them to be promoted, so objects cost the main
 * thread's collector; typed arrays and bytes outside the heap cost it nothing. The raw UIDs are read out (as new
 * strings, never as slices that would keep the answer alive) only where they are written or kept for long.
 */
export class ScannedAnswers {
  readonly code: Uint8Array;
  /** Where each mapped item's `u` starts in `bytes` (RAW_UID_LENGTH bytes, each base64's, as the scanner checked). */
  readonly uAt: Int32Array;
  /** Where each mapped item's `p` starts in `bytes`, or -1 when it is null. */
  readonly pAt: Int32Array;
  readonly r: Float64Array;
  /** Items written so far. */
  count = 0;

  constructor(
    /** The answer's decrypted JSON; its raw UIDs are ASCII. */
    readonly bytes: Buffer,
    capacity: number,
  ) {
    this.code = new Uint8Array(capacity);
    this.uAt = new Int32Array(capacity);
    this.pAt = new Int32Array(capacity);
    this.r = new Float64Array(capacity);
  }

  addMapped(uAt: number, pAt: number | null, r: number): void {
    const i = this.count++;
    this.code[i] = ANSWER_CODE.mapped;
    this.uAt[i] = uAt;
    this.pAt[i] = pAt === null ? NO_P : pAt;
    this.r[i] = r;
  }

  addUnmapped(code: typeof ANSWER_CODE.optout | typeof ANSWER_CODE.invalid): void {
    this.code[this.count++] = code;
  }

  /** Item i's raw UID, as a string of its own. */
  u(i: number): string {
    const at = this.uAt[i];
    return (this.bytes as LatinBytes).latin1Slice(at, at + RAW_UID_LENGTH);
  }

  /** Item i's previous raw UID, as a string of its own, or null. */
  p(i: number): string | null {
    const at = this.pAt[i];
    return at === NO_P ? null : (this.bytes as LatinBytes).latin1Slice(at, at + RAW_UID_LENGTH);
  }

  /** Item i as the general reader gives it. */
  item(i: number): MapV3Item {
    switch (this.code[i]) {
      case ANSWER_CODE.mapped:
        return { u: this.u(i), p: this.p(i), r: this.r[i] };
      case ANSWER_CODE.optout:
        return OPTOUT_ITEM;
      default:
        return INVALID_ITEM;
    }
  }

  /** Every item as the general reader gives it. */
  items(): MapV3Item[] {
    const items = new Array<MapV3Item>(this.count);
    for (let i = 0; i < this.count; i++) items[i] = this.item(i);
    return items;
  }
}

/** Buffer's own latin1 decoder of a range (what toString('latin1', start, end) calls, without its checks). */
type LatinBytes = Buffer & { latin1Slice(start: number, end: number): string };

/** The arrays of one v3 map answer, each read as objects (the general reader) or packed (the one-pass scan). */
export interface MapV3Answers {
  email: MapV3Item[] | ScannedAnswers;
  email_hash: MapV3Item[] | ScannedAnswers;
  phone: MapV3Item[] | ScannedAnswers;
  phone_hash: MapV3Item[] | ScannedAnswers;
}

/** Items in an array of answers, however it was read. */
export function answerCount(answers: MapV3Item[] | ScannedAnswers): number {
  return answers instanceof ScannedAnswers ? answers.count : answers.length;
}
