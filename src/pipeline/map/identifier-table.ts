import type { DiiType } from '../../identity/index.js';
import { ANSWER_CODE, INVALID_ITEM, isMappedV3, ScannedAnswers, type MapV3Item } from '../../protocol/index.js';
import { SLOT, type RowChunk } from './row-chunk.js';

/** The reason text of an opted-out identifier (the service's `e`). */
export const OPTOUT_REASON = 'optout';
const INVALID_REASON = (INVALID_ITEM as { e: string }).e;

/** Writes one answer (an object, or item `index` of packed answers) into one identifier cell of a chunk. */
export function answerSlot(chunk: RowChunk, slot: number, item: MapV3Item | ScannedAnswers, index: number): void {
  if (item instanceof ScannedAnswers) {
    const code = item.code[index];
    if (code === ANSWER_CODE.mapped) chunk.setScanned(slot, item, index);
    else if (code === ANSWER_CODE.optout) chunk.setUnmapped(slot, SLOT.optout, OPTOUT_REASON);
    else chunk.setUnmapped(slot, SLOT.invalid, INVALID_REASON);
  } else if (isMappedV3(item)) chunk.setMapped(slot, item);
  else if (item.e === OPTOUT_REASON) chunk.setUnmapped(slot, SLOT.optout, OPTOUT_REASON);
  else chunk.setUnmapped(slot, SLOT.invalid, item.e);
}

/**
 * One (DII type, hash) of the run: first waiting for its answer, with every cell that asked for it, then holding
 * the answer for repeats further down. It is sent once; the first cell is held inline because most identifiers
 * are not repeated. Once answered it lets go of the cells, so it keeps no rows alive.
 */
export class TrackedIdentifier {
  private chunk: RowChunk | null;
  private slot: number;
  private moreChunks: RowChunk[] | null = null;
  private moreSlots: number[] | null = null;
  /** The answer, once there is one: an object, or packed answers (item `index` of them). */
  answer: MapV3Item | ScannedAnswers | null = null;
  index = 0;
  /** The request for it failed: a repeat must be sent again. */
  failed = false;

  constructor(
    readonly type: DiiType,
    readonly hash: string,
    chunk: RowChunk,
    slot: number,
  ) {
    this.chunk = chunk;
    this.slot = slot;
  }

  addWaiter(chunk: RowChunk, slot: number): void {
    if (this.moreChunks === null || this.moreSlots === null) {
      this.moreChunks = [chunk];
      this.moreSlots = [slot];
    } else {
      this.moreChunks.push(chunk);
      this.moreSlots.push(slot);
    }
  }

  /** Cells waiting on this identifier. */
  get waiters(): number {
    return (this.chunk === null ? 0 : 1) + (this.moreSlots === null ? 0 : this.moreSlots.length);
  }

  /** Answers every waiting cell with `item` (or item `index` of packed answers). */
  resolve(item: MapV3Item | ScannedAnswers, index = 0): void {
    this.answer = item;
    this.index = index;
    if (this.chunk !== null) answerSlot(this.chunk, this.slot, item, index);
    const chunks = this.moreChunks;
    const slots = this.moreSlots;
    if (chunks !== null && slots !== null)
      for (let i = 0; i < chunks.length; i++) answerSlot(chunks[i], slots[i], item, index);
    this.release();
  }

  /**
   * Holds the answer as an object of its own rather than in its batch's packed answers: an entry that stays
   * remembered past its generation would otherwise keep its whole batch (the answer's bytes) alive with it.
   */
  detach(): void {
    const answer = this.answer;
    if (answer instanceof ScannedAnswers) {
      this.answer = answer.item(this.index);
      this.index = 0;
    }
  }

  fail(reason: string): void {
    this.failed = true;
    if (this.chunk !== null) this.chunk.setUnmapped(this.slot, SLOT.error, reason);
    const chunks = this.moreChunks;
    const slots = this.moreSlots;
    if (chunks !== null && slots !== null)
      for (let i = 0; i < chunks.length; i++) chunks[i].setUnmapped(slots[i], SLOT.error, reason);
    this.release();
  }

  private release(): void {
    this.chunk = null;
    this.moreChunks = null;
    this.moreSlots = null;
  }
}

const B64_VALUE = new Int32Array(128);
'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'.split('').forEach((c, i) => {
  B64_VALUE[c.charCodeAt(0)] = i;
});

/** Set in a key for a phone hash, so both DII types share one generation. */
const PHONE_BIT = 1 << 30;

/**
 * 30 bits of a base64 SHA-256 as a small integer, with the DII type above them. Hashes are uniformly random, so
 * these bits are as good a table key as the whole string; the string is compared only where the keys match.
 */
function keyOf(type: DiiType, hash: string): number {
  return (
    (type === 'email' ? 0 : PHONE_BIT) |
    (B64_VALUE[hash.charCodeAt(0) & 127] << 24) |
    (B64_VALUE[hash.charCodeAt(1) & 127] << 18) |
    (B64_VALUE[hash.charCodeAt(2) & 127] << 12) |
    (B64_VALUE[hash.charCodeAt(3) & 127] << 6) |
    B64_VALUE[hash.charCodeAt(4) & 127]
  );
}

/**
 * Set in every key a slot holds (keys use the 31 bits below it), so that 0 marks an empty slot: a probe reads only
 * the keys, which fit in the cache, and touches an entry only where its key matches.
 */
const OCCUPIED = 1 << 31;

/**
 * One generation of the table: an open-addressed hash table of fixed size (linear probing, never more than half
 * full), allocated once and cleared for reuse. A Map per generation would grow (and copy) its storage again for
 * every generation, and that storage lives long enough to be promoted: garbage the main thread's old generation
 * then has to make room for.
 */
class Generation {
  private readonly keys: Int32Array;
  private readonly entries: (TrackedIdentifier | undefined)[];
  private readonly mask: number;
  size = 0;

  constructor(maxEntries: number) {
    let capacity = 16;
    while (capacity < maxEntries * 2) capacity *= 2;
    this.keys = new Int32Array(capacity);
    this.entries = new Array<TrackedIdentifier | undefined>(capacity).fill(undefined);
    this.mask = capacity - 1;
  }

  get(key: number, hash: string): TrackedIdentifier | undefined {
    const { keys, entries, mask } = this;
    const tagged = key | OCCUPIED;
    for (let i = key & mask; ; i = (i + 1) & mask) {
      const held = keys[i];
      if (held === 0) return undefined;
      if (held === tagged) {
        const entry = entries[i] as TrackedIdentifier;
        if (entry.hash === hash) return entry;
      }
    }
  }

  /** Adds the entry, or replaces the one with the same type and hash. */
  set(key: number, entry: TrackedIdentifier): void {
    const { keys, entries, mask } = this;
    const tagged = key | OCCUPIED;
    for (let i = key & mask; ; i = (i + 1) & mask) {
      const held = keys[i];
      if (held === 0) {
        keys[i] = tagged;
        entries[i] = entry;
        this.size++;
        return;
      }
      if (held === tagged && (entries[i] as TrackedIdentifier).hash === entry.hash) {
        entries[i] = entry;
        return;
      }
    }
  }

  /** Hands each entry still waiting for its answer (not answered, not failed) to `keep`. */
  forEachWaiting(keep: (key: number, entry: TrackedIdentifier) => void): void {
    if (this.size === 0) return;
    const { keys, entries } = this;
    for (let i = 0; i < entries.length; i++) {
      const entry = entries[i];
      if (entry !== undefined && entry.answer === null && !entry.failed) keep(keys[i] & ~OCCUPIED, entry);
    }
  }

  /** Forgets every entry; the storage stays for the next use. */
  clear(): void {
    if (this.size === 0) return;
    this.keys.fill(0);
    this.entries.fill(undefined);
    this.size = 0;
  }
}

/**
 * The identifiers of the run, waiting or recently answered, by DII type and hash: the one lookup a cell costs.
 * Bounded, so memory stays flat however long the input is: a repeat of an answered identifier that was forgotten
 * is sent again, or answered by the state file, which holds every answer committed. Two generations instead of
 * a strict LRU list: when the young one is full it becomes the old one and the previous old one is dropped whole
 * (its storage becomes the new young one), and a hit in the old one moves up. An identifier still waiting for its
 * answer (being looked up or in flight) is never forgotten: the state file does not hold it yet, so a repeat
 * must wait for it rather than be sent again. Those are kept apart until answered; the reassembly window bounds
 * how many there are.
 */
export class IdentifierTable {
  private young: Generation;
  private old: Generation;
  private readonly generation: number;
  /** Identifiers of dropped generations still waiting for their answer, by key (a few share one). */
  private waiting = new Map<number, TrackedIdentifier[]>();
  /** True once a generation with entries was dropped: from then on a repeat may be counted as new. */
  dropped = false;

  constructor(capacity: number) {
    this.generation = Math.max(1, Math.floor(capacity / 2));
    this.young = new Generation(this.generation);
    this.old = new Generation(this.generation);
  }

  get(type: DiiType, hash: string): TrackedIdentifier | undefined {
    const key = keyOf(type, hash);
    const entry = this.young.get(key, hash);
    if (entry !== undefined) return entry;
    const aging = this.old.get(key, hash);
    if (aging !== undefined) {
      aging.detach();
      this.put(key, aging);
      return aging;
    }
    if (this.waiting.size === 0) return undefined;
    const held = this.waiting.get(key);
    if (held === undefined) return undefined;
    for (let i = 0; i < held.length; i++) if (held[i].hash === hash && held[i].type === type) return held[i];
    return undefined;
  }

  add(entry: TrackedIdentifier): void {
    this.put(keyOf(entry.type, entry.hash), entry);
  }

  private put(key: number, entry: TrackedIdentifier): void {
    this.young.set(key, entry);
    if (this.young.size >= this.generation) {
      if (this.old.size > 0) this.dropped = true;
      const dropped = this.old;
      this.keepWaiting(dropped);
      dropped.clear();
      this.old = this.young;
      this.young = dropped;
    }
  }

  /**
   * Keeps apart the entries of a generation about to be dropped that still wait for their answer; lets go of
   * those kept earlier that have been answered (or failed) since.
   */
  private keepWaiting(dropped: Generation): void {
    const waiting = new Map<number, TrackedIdentifier[]>();
    const keep = (key: number, entry: TrackedIdentifier): void => {
      const held = waiting.get(key);
      if (held === undefined) waiting.set(key, [entry]);
      else if (!held.includes(entry)) held.push(entry);
    };
    for (const [key, held] of this.waiting)
      for (const entry of held) if (entry.answer === null && !entry.failed) keep(key, entry);
    dropped.forEachWaiting(keep);
    this.waiting = waiting;
  }

  /** Entries held (one promoted from the old generation counts twice until that generation is dropped). */
  get size(): number {
    return this.young.size + this.old.size;
  }
}
