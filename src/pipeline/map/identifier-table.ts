import type { DiiType } from '../../identity/index.js';
import { isMappedV3, type MapV3Item } from '../../protocol/index.js';
import { SLOT, type RowChunk } from './row-chunk.js';

/** The reason text of an opted-out identifier (the service's `e`). */
export const OPTOUT_REASON = 'optout';

/** Writes one answer into one identifier cell of a chunk. */
export function answerSlot(chunk: RowChunk, slot: number, item: MapV3Item): void {
  if (isMappedV3(item)) chunk.setMapped(slot, item);
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
  /** The answer, once there is one. */
  answer: MapV3Item | null = null;
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

  resolve(item: MapV3Item): void {
    this.answer = item;
    if (this.chunk !== null) answerSlot(this.chunk, this.slot, item);
    const chunks = this.moreChunks;
    const slots = this.moreSlots;
    if (chunks !== null && slots !== null)
      for (let i = 0; i < chunks.length; i++) answerSlot(chunks[i], slots[i], item);
    this.release();
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

/**
 * 30 bits of a base64 SHA-256 as a small integer. Hashes are uniformly random, so this is as good a table key as
 * the whole string, and a Map finds an integer key for about half the cost of a 44-character string.
 */
function keyOf(hash: string): number {
  return (
    (B64_VALUE[hash.charCodeAt(0) & 127] << 24) |
    (B64_VALUE[hash.charCodeAt(1) & 127] << 18) |
    (B64_VALUE[hash.charCodeAt(2) & 127] << 12) |
    (B64_VALUE[hash.charCodeAt(3) & 127] << 6) |
    B64_VALUE[hash.charCodeAt(4) & 127]
  );
}

/** One generation of the table: by 30-bit key, and by full hash for the rare second hash with the same key. */
class Generation {
  readonly byKey = new Map<number, TrackedIdentifier>();
  readonly collided = new Map<string, TrackedIdentifier>();

  get size(): number {
    return this.byKey.size + this.collided.size;
  }

  get(key: number, hash: string): TrackedIdentifier | undefined {
    const entry = this.byKey.get(key);
    if (entry === undefined || entry.hash === hash) return entry;
    return this.collided.size === 0 ? undefined : this.collided.get(hash);
  }

  set(key: number, entry: TrackedIdentifier): void {
    const held = this.byKey.get(key);
    if (held === undefined || held.hash === entry.hash) this.byKey.set(key, entry);
    else this.collided.set(entry.hash, entry);
  }
}

/**
 * The identifiers of the run, waiting or recently answered, by DII type and hash: the one lookup a cell costs.
 * Bounded, so memory stays flat however long the input is: older repeats are sent again (or answered by the
 * state file). Two generations instead of a strict LRU list: when the young one is full it becomes the old one
 * and the previous old one is dropped whole, and a hit in the old one moves up. An identifier still in flight
 * when dropped is still answered by its batch; only later repeats of it are sent again.
 */
export class IdentifierTable {
  private young: [Generation, Generation] = [new Generation(), new Generation()];
  private old: [Generation, Generation] = [new Generation(), new Generation()];
  private readonly generation: number;
  /** True once a generation with entries was dropped: from then on a repeat may be counted as new. */
  dropped = false;

  constructor(capacity: number) {
    this.generation = Math.max(1, Math.floor(capacity / 2));
  }

  get(type: DiiType, hash: string): TrackedIdentifier | undefined {
    const t = type === 'email' ? 0 : 1;
    const key = keyOf(hash);
    const entry = this.young[t].get(key, hash);
    if (entry !== undefined) return entry;
    const aging = this.old[t].get(key, hash);
    if (aging !== undefined) this.put(t, key, aging);
    return aging;
  }

  add(entry: TrackedIdentifier): void {
    this.put(entry.type === 'email' ? 0 : 1, keyOf(entry.hash), entry);
  }

  private put(t: 0 | 1, key: number, entry: TrackedIdentifier): void {
    this.young[t].set(key, entry);
    if (this.young[0].size + this.young[1].size >= this.generation) {
      if (this.old[0].size + this.old[1].size > 0) this.dropped = true;
      this.old = this.young;
      this.young = [new Generation(), new Generation()];
    }
  }

  /** Entries held (one promoted from the old generation counts twice until that generation is dropped). */
  get size(): number {
    return this.young[0].size + this.young[1].size + this.old[0].size + this.old[1].size;
  }
}
