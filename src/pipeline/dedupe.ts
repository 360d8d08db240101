import type { DiiType } from '../identity/index.js';
import { isMappedV3, type MapV3Item } from '../protocol/index.js';
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
 * One (DII type, hash) that is waiting for its answer, and every cell that asked for it. It is sent once; the
 * cells that repeat it while it is waiting are answered with it. The first cell is held inline because most
 * identifiers are not repeated.
 */
export class PendingItem {
  private moreChunks: RowChunk[] | null = null;
  private moreSlots: number[] | null = null;

  constructor(
    readonly type: DiiType,
    readonly hash: string,
    private readonly chunk: RowChunk,
    private readonly slot: number,
  ) {}

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
    return 1 + (this.moreSlots === null ? 0 : this.moreSlots.length);
  }

  answer(item: MapV3Item): void {
    answerSlot(this.chunk, this.slot, item);
    const chunks = this.moreChunks;
    const slots = this.moreSlots;
    if (chunks === null || slots === null) return;
    for (let i = 0; i < chunks.length; i++) answerSlot(chunks[i], slots[i], item);
  }

  fail(reason: string): void {
    this.chunk.setUnmapped(this.slot, SLOT.error, reason);
    const chunks = this.moreChunks;
    const slots = this.moreSlots;
    if (chunks === null || slots === null) return;
    for (let i = 0; i < chunks.length; i++) chunks[i].setUnmapped(slots[i], SLOT.error, reason);
  }
}

/** Identifiers waiting for an answer (queued in a batch or in flight), by DII type and hash. */
export class PendingIndex {
  private readonly email = new Map<string, PendingItem>();
  private readonly phone = new Map<string, PendingItem>();

  get size(): number {
    return this.email.size + this.phone.size;
  }

  get(type: DiiType, hash: string): PendingItem | undefined {
    return (type === 'email' ? this.email : this.phone).get(hash);
  }

  add(item: PendingItem): void {
    (item.type === 'email' ? this.email : this.phone).set(item.hash, item);
  }

  delete(item: PendingItem): void {
    (item.type === 'email' ? this.email : this.phone).delete(item.hash);
  }
}

/**
 * Answers of the most recently answered identifiers, so that repeats a little further down the input are not
 * sent again. Bounded: memory stays flat however long the input is; older repeats are sent again (or answered
 * by the state file). Least recently used first out (a Map iterates in insertion order; a hit re-inserts).
 */
export class RecentAnswers {
  private readonly email = new Map<string, MapV3Item>();
  private readonly phone = new Map<string, MapV3Item>();

  constructor(readonly capacity: number) {}

  get(type: DiiType, hash: string): MapV3Item | undefined {
    const map = type === 'email' ? this.email : this.phone;
    const item = map.get(hash);
    if (item !== undefined) {
      map.delete(hash);
      map.set(hash, item);
    }
    return item;
  }

  set(type: DiiType, hash: string, item: MapV3Item): void {
    if (this.capacity <= 0) return;
    const map = type === 'email' ? this.email : this.phone;
    map.delete(hash);
    map.set(hash, item);
    if (this.email.size + this.phone.size > this.capacity) this.evictOne();
  }

  private evictOne(): void {
    // evict from the larger map: the other is usually empty or small, so recency is nearly global anyway
    const map = this.email.size >= this.phone.size ? this.email : this.phone;
    const oldest = map.keys().next();
    if (!oldest.done) map.delete(oldest.value);
  }

  get size(): number {
    return this.email.size + this.phone.size;
  }
}
