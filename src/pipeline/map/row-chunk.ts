import { ScannedAnswers, type MappedV3 } from '../../protocol/index.js';
import type { InputRow } from '../io/table.js';

/** What became of one identifier cell. Numbers, so a chunk keeps them in one typed array. */
export const SLOT = {
  pending: 0,
  mapped: 1,
  optout: 2,
  invalid: 3,
  error: 4,
  /** The identifier cell is empty: nothing to map, not an error in the data. */
  missing: 5,
} as const;

export type SlotStatus = (typeof SLOT)[keyof typeof SLOT];

export const SLOT_STATUS_NAMES = ['pending', 'mapped', 'optout', 'invalid', 'error', 'missing'] as const;

/** Where a worker thread keeps a piece's rows until their answers come back. */
export interface RowTicket {
  thread: number;
  piece: number;
}

/**
 * A chunk of input rows on its way through the engine, and the answers for its identifier cells. The chunk, not
 * the row, is the unit that waits in the reassembly window: answers are kept column-wise (one slot per row and
 * identifier column, slot = row * width + column), so a row costs no object of its own.
 */
export class RowChunk {
  readonly status: Uint8Array;
  /**
   * Where a mapped slot's answer is: an answer object, or the packed answers of a batch (its item in
   * answerIndex), which spare the chunk an object and two strings per slot while it waits (see ScannedAnswers).
   */
  readonly answerOf: (MappedV3 | ScannedAnswers | null)[];
  /** Per slot: the item's index in its packed answers. */
  readonly answerIndex: Int32Array;
  private answers: (MappedV3 | null)[] | null = null;
  /**
   * Why a slot is not mapped (invalid, optout or error), as a number per slot: 0 when it has no reason, else 1 +
   * the index of its text in reasonTexts. A chunk has a few distinct reasons; numbers cost the collector nothing
   * while the chunk waits, and are handed to the thread that writes its rows as they are (SlotAnswers).
   */
  readonly reasonOf: Uint32Array;
  /** The distinct reasons of the chunk's slots, each once, in the order they were first given. */
  readonly reasonTexts: string[] = [];
  private lastReason: string | null = null;
  private lastReasonOf = 0;
  private reasons: (string | null)[] | null = null;
  /**
   * --emit-hash: the chunk's prepared cells (PreparedRows' status, phone and hashes), whose hashes the output
   * shows; set by the engine when asked.
   */
  sent?: { status: Uint8Array; phone: Uint8Array; hashes: Uint8Array };
  /** Slots still waiting for an answer; the chunk can leave once this is 0. */
  unanswered: number;

  /** Rows in the chunk. */
  readonly rowCount: number;

  constructor(
    /** The rows themselves when this thread holds them; empty when a worker thread does (see `ticket`). */
    readonly rows: InputRow[],
    /** Identifier columns per row. */
    readonly width: number,
    /** With --threads: which parsed piece of a worker thread holds the rows, for encoding them there. */
    readonly ticket?: RowTicket,
    rowCount = rows.length,
  ) {
    this.rowCount = rowCount;
    const n = rowCount * width;
    this.status = new Uint8Array(n);
    this.answerOf = new Array<MappedV3 | ScannedAnswers | null>(n).fill(null);
    this.answerIndex = new Int32Array(n);
    this.reasonOf = new Uint32Array(n);
    this.unanswered = n;
  }

  /** The service's (or the state's) answer, for mapped slots; made once, when first asked for. */
  get mapped(): (MappedV3 | null)[] {
    if (this.answers !== null) return this.answers;
    const { answerOf, answerIndex } = this;
    const answers = new Array<MappedV3 | null>(answerOf.length);
    for (let slot = 0; slot < answerOf.length; slot++) {
      const of = answerOf[slot];
      answers[slot] = of instanceof ScannedAnswers ? (of.item(answerIndex[slot]) as MappedV3) : of;
    }
    // answers arriving later would not be seen: only a chunk whose slots are all answered is read
    if (this.unanswered === 0) this.answers = answers;
    return answers;
  }

  /** Why each slot is not mapped (null for mapped and pending slots); made once, when first asked for. */
  get reason(): (string | null)[] {
    if (this.reasons !== null) return this.reasons;
    const reasons = unpackReasons(this);
    // reasons given later would not be seen: only a chunk whose slots are all answered is read
    if (this.unanswered === 0) this.reasons = reasons;
    return reasons;
  }

  setMapped(slot: number, item: MappedV3): void {
    this.status[slot] = SLOT.mapped;
    this.answerOf[slot] = item;
    this.unanswered--;
  }

  /** A mapped slot answered by item `index` of packed answers. */
  setScanned(slot: number, answers: ScannedAnswers, index: number): void {
    this.status[slot] = SLOT.mapped;
    this.answerOf[slot] = answers;
    this.answerIndex[slot] = index;
    this.unanswered--;
  }

  setUnmapped(
    slot: number,
    status: typeof SLOT.optout | typeof SLOT.invalid | typeof SLOT.error | typeof SLOT.missing,
    reason: string,
  ): void {
    this.status[slot] = status;
    // most slots in a row have the reason of the one before (empty cells, a failed batch)
    if (reason !== this.lastReason) {
      let of = this.reasonTexts.indexOf(reason) + 1;
      if (of === 0) of = this.reasonTexts.push(reason);
      this.lastReason = reason;
      this.lastReasonOf = of;
    }
    this.reasonOf[slot] = this.lastReasonOf;
    this.unanswered--;
  }
}

/** The reason of each slot as text again (null for mapped and pending slots), from the numbers a chunk keeps. */
export function unpackReasons(numbered: {
  readonly reasonTexts: readonly string[];
  readonly reasonOf: Uint32Array;
}): (string | null)[] {
  const { reasonTexts, reasonOf } = numbered;
  const reason = new Array<string | null>(reasonOf.length);
  for (let slot = 0; slot < reasonOf.length; slot++)
    reason[slot] = reasonOf[slot] === 0 ? null : reasonTexts[reasonOf[slot] - 1];
  return reason;
}
