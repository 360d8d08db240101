// The run's identifiers by DII type and hash, with their answers and waiting cells, held in parallel arrays.
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

const B64_VALUE = new Int32Array(128);
'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'.split('').forEach((c, i) => {
  B64_VALUE[c.charCodeAt(0)] = i;
});

/** Set in a key for a phone hash, so both DII types share one table. */
const PHONE_BIT = 1 << 30;

/**
 * Set in every key the index holds (keys use the 31 bits below it), so that 0 marks an empty place: a probe reads
 * only the keys, which fit in the cache, and compares a hash only where its key matches.
 */
const OCCUPIED = 1 << 31;

/**
 * 30 bits of a base64 SHA-256 as a small integer, with the DII type above them and OCCUPIED set. Hashes are
 * uniformly random, so these bits are as good a key as the whole string; the hash is compared where keys match.
 * The hash is read as its words (hashWords): characters 0-3 are the first word's bytes (lowest first on a
 * little-endian machine; on another, other characters, as random).
 */
function keyOf(type: DiiType, words: Int32Array, at: number): number {
  const w = words[at];
  return (
    OCCUPIED |
    (type === 'email' ? 0 : PHONE_BIT) |
    (B64_VALUE[w & 127] << 24) |
    (B64_VALUE[(w >> 8) & 127] << 18) |
    (B64_VALUE[(w >> 16) & 127] << 12) |
    (B64_VALUE[(w >>> 24) & 127] << 6) |
    B64_VALUE[words[at + 1] & 127]
  );
}

/** Characters of a hash as the service reads it (normalizeHash, sha256Base64). */
const HASH_CHARS = 44;
/** A hash is held as its characters, four to an integer (they are ASCII, so each fits in 7 bits). */
export const HASH_WORDS = HASH_CHARS / 4;

/**
 * Prepared hashes (PreparedRows.hashes: HASH_CHARS bytes each, from byte 0 of their buffer) as 32-bit words:
 * hash h is words h * HASH_WORDS to h * HASH_WORDS + HASH_WORDS - 1, in the table's byte order.
 */
export function hashWords(hashes: Uint8Array): Int32Array {
  if (hashes.byteOffset % 4 === 0) return new Int32Array(hashes.buffer, hashes.byteOffset, hashes.byteLength >> 2);
  return new Int32Array(new Uint8Array(hashes).buffer, 0, hashes.byteLength >> 2);
}

/** A hash's text as words (see hashWords). */
export function textWords(hash: string): Int32Array {
  if (hash.length !== HASH_CHARS) throw new Error(`IdentifierTable: a hash of ${hash.length} characters`);
  return hashWords(Buffer.from(hash, 'latin1'));
}

/** What an identifier's answer is: still to come, there, or the request for it failed. */
const WAITING = 0;
const ANSWERED = 1;
const FAILED = 2;

/** genOf of an identifier kept apart (dropped while still waiting), and of a free id. */
const APART = -1;
const FREE = -2;

/** Cells beyond the first that wait for one identifier: rare (a repeat of an identifier not yet answered). */
interface MoreWaiters {
  chunks: RowChunk[];
  slots: number[];
}

/**
 * The identifiers of the run, waiting or recently answered, by DII type and hash: the one lookup a cell costs.
 * An identifier is an id (a small integer): its hash, answer and first waiting cell are kept in arrays by id
 * beside an open-addressed index of keys, so that a new identifier costs no object, and a probe compares the
 * hash in place rather than through an object and a string that would have to live as long as the table.
 *
 * Bounded, so memory stays flat however long the input is: a repeat of an answered identifier that was forgotten
 * is sent again, or answered by the state file, which holds every answer committed. Two generations instead of
 * a strict LRU list: when the young one is full it becomes the old one and the previous old one is dropped whole
 * (its ids are freed for reuse), and a hit in the old one moves up. An identifier still waiting for its answer
 * (being looked up or in flight) is never forgotten: the state file does not hold it yet, so a repeat must wait
 * for it rather than be sent again. Those are kept apart until answered; the reassembly window bounds how many
 * there are.
 */
export class IdentifierTable {
  private readonly generation: number;
  /** Ids that joined the young and the old generation, in order (an id that moved up since is skipped). */
  private youngIds: Int32Array;
  private oldIds: Int32Array;
  private youngCount = 0;
  private oldCount = 0;
  private youngGen = 1;
  private oldGen = 0;
  /** Ids kept apart: dropped with their generation while still waiting (some answered or failed since). */
  private apart: number[] = [];
  /** True once a generation with entries was dropped: from then on a repeat may be counted as new. */
  dropped = false;

  // by id
  private capacity = 0;
  private hashWords = new Int32Array(0);
  private keys = new Int32Array(0);
  private genOf = new Int32Array(0);
  private state = new Uint8Array(0);
  private answers: (MapV3Item | ScannedAnswers | null)[] = [];
  private answerIndexes = new Int32Array(0);
  private firstChunk: (RowChunk | null)[] = [];
  private firstSlot = new Int32Array(0);
  private readonly moreWaiters = new Map<number, MoreWaiters>();
  private free = new Int32Array(0);
  private freeCount = 0;

  /**
   * The index: places of two integers, a key and its id side by side (a hit reads one cache line), twice as many
   * places as ids so that it is never more than half full.
   */
  private index = new Int32Array(0);
  private indexMask = 0;

  constructor(capacity: number) {
    this.generation = Math.max(1, Math.floor(capacity / 2));
    this.youngIds = new Int32Array(this.generation);
    this.oldIds = new Int32Array(this.generation);
    let ids = 16;
    while (ids < this.generation * 2 + 1) ids *= 2;
    this.grow(ids);
  }

  /**
   * The id of (type, hash), or -1; a hit in the old generation moves up to the young one. The hash is words
   * `at` to `at + HASH_WORDS - 1` of `words` (hashWords).
   */
  find(type: DiiType, words: Int32Array, at: number): number {
    const key = keyOf(type, words, at);
    const { index, indexMask } = this;
    for (let i = key & indexMask; ; i = (i + 1) & indexMask) {
      const held = index[2 * i];
      if (held === 0) return -1;
      if (held === key) {
        const id = index[2 * i + 1];
        if (this.sameHash(id, words, at)) {
          if (this.genOf[id] === this.oldGen) this.moveUp(id);
          return id;
        }
      }
    }
  }

  /** Adds a new identifier (its hash given as find() takes it), waiting for its answer with one cell; returns its id. */
  add(type: DiiType, words: Int32Array, at: number, chunk: RowChunk, slot: number): number {
    if (at + HASH_WORDS > words.length) throw new Error('IdentifierTable: a hash past the end of its words');
    if (this.freeCount === 0) this.grow(this.capacity * 2);
    const id = this.free[--this.freeCount];
    const key = keyOf(type, words, at);
    const held = this.hashWords;
    const base = id * HASH_WORDS;
    for (let k = 0; k < HASH_WORDS; k++) held[base + k] = words[at + k];
    this.keys[id] = key;
    this.state[id] = WAITING;
    this.answers[id] = null;
    this.firstChunk[id] = chunk;
    this.firstSlot[id] = slot;
    this.insert(key, id);
    this.join(id);
    return id;
  }

  /** Makes a failed identifier wait again for a new request, with one cell. */
  retry(id: number, chunk: RowChunk, slot: number): void {
    this.state[id] = WAITING;
    this.answers[id] = null;
    this.firstChunk[id] = chunk;
    this.firstSlot[id] = slot;
    if (this.genOf[id] !== this.youngGen) this.join(id);
  }

  /** The DII type of an identifier. */
  typeOf(id: number): DiiType {
    return (this.keys[id] & PHONE_BIT) === 0 ? 'email' : 'phone';
  }

  isWaiting(id: number): boolean {
    return this.state[id] === WAITING;
  }

  isFailed(id: number): boolean {
    return this.state[id] === FAILED;
  }

  /** The answer of an answered identifier: an object, or packed answers (item answerIndex(id) of them). */
  answer(id: number): MapV3Item | ScannedAnswers | null {
    return this.answers[id];
  }

  answerIndex(id: number): number {
    return this.answerIndexes[id];
  }

  /** One more cell waits for a waiting identifier. */
  addWaiter(id: number, chunk: RowChunk, slot: number): void {
    if (this.firstChunk[id] === null) {
      this.firstChunk[id] = chunk;
      this.firstSlot[id] = slot;
      return;
    }
    const more = this.moreWaiters.get(id);
    if (more === undefined) this.moreWaiters.set(id, { chunks: [chunk], slots: [slot] });
    else {
      more.chunks.push(chunk);
      more.slots.push(slot);
    }
  }

  /** Cells waiting on an identifier. */
  waiters(id: number): number {
    const more = this.moreWaiters.get(id);
    return (this.firstChunk[id] === null ? 0 : 1) + (more === undefined ? 0 : more.slots.length);
  }

  /** Answers every cell waiting for the identifier with `item` (or item `index` of packed answers). */
  resolve(id: number, item: MapV3Item | ScannedAnswers, index = 0): void {
    this.state[id] = ANSWERED;
    this.answers[id] = item;
    this.answerIndexes[id] = index;
    const chunk = this.firstChunk[id];
    if (chunk !== null) {
      answerSlot(chunk, this.firstSlot[id], item, index);
      this.firstChunk[id] = null;
    }
    if (this.moreWaiters.size === 0) return;
    const more = this.moreWaiters.get(id);
    if (more === undefined) return;
    this.moreWaiters.delete(id);
    for (let i = 0; i < more.chunks.length; i++) answerSlot(more.chunks[i], more.slots[i], item, index);
  }

  /** Fails every cell waiting for the identifier: a repeat of it is sent again. */
  fail(id: number, reason: string): void {
    this.state[id] = FAILED;
    const chunk = this.firstChunk[id];
    if (chunk !== null) {
      chunk.setUnmapped(this.firstSlot[id], SLOT.error, reason);
      this.firstChunk[id] = null;
    }
    if (this.moreWaiters.size === 0) return;
    const more = this.moreWaiters.get(id);
    if (more === undefined) return;
    this.moreWaiters.delete(id);
    for (let i = 0; i < more.chunks.length; i++) more.chunks[i].setUnmapped(more.slots[i], SLOT.error, reason);
  }

  /** Entries held (one moved up from the old generation counts twice until that generation is dropped). */
  get size(): number {
    return this.youngCount + this.oldCount;
  }

  private sameHash(id: number, words: Int32Array, at: number): boolean {
    const held = this.hashWords;
    const base = id * HASH_WORDS;
    for (let k = 0; k < HASH_WORDS; k++) if (held[base + k] !== words[at + k]) return false;
    return true;
  }

  /**
   * A hit in the old generation joins the young one. Its answer is then held as an object of its own rather than
   * in its batch's packed answers: an identifier remembered past its generation would otherwise keep its whole
   * batch (the answer's bytes) alive with it.
   */
  private moveUp(id: number): void {
    const answer = this.answers[id];
    if (answer instanceof ScannedAnswers) {
      this.answers[id] = answer.item(this.answerIndexes[id]);
      this.answerIndexes[id] = 0;
    }
    this.join(id);
  }

  /** Adds an id to the young generation; a full young generation becomes the old one. */
  private join(id: number): void {
    this.genOf[id] = this.youngGen;
    this.youngIds[this.youngCount++] = id;
    if (this.youngCount >= this.generation) this.rotate();
  }

  /**
   * Drops the old generation: its ids still waiting are kept apart, the others freed, with those kept apart
   * earlier that have been answered (or failed) since. The young generation becomes the old one.
   */
  private rotate(): void {
    if (this.oldCount > 0) this.dropped = true;
    const { genOf, state } = this;
    const apart: number[] = [];
    for (const id of this.apart) {
      if (genOf[id] !== APART) continue;
      if (state[id] === WAITING) apart.push(id);
      else this.release(id);
    }
    const oldIds = this.oldIds;
    const oldGen = this.oldGen;
    for (let i = 0; i < this.oldCount; i++) {
      const id = oldIds[i];
      if (genOf[id] !== oldGen) continue;
      if (state[id] === WAITING) {
        genOf[id] = APART;
        apart.push(id);
      } else this.release(id);
    }
    this.apart = apart;
    this.oldIds = this.youngIds;
    this.oldCount = this.youngCount;
    this.oldGen = this.youngGen;
    this.youngIds = oldIds;
    this.youngCount = 0;
    this.youngGen++;
  }

  /** Forgets an identifier: out of the index, its id free for reuse. */
  private release(id: number): void {
    this.remove(this.keys[id], id);
    this.genOf[id] = FREE;
    this.answers[id] = null;
    this.firstChunk[id] = null;
    this.free[this.freeCount++] = id;
  }

  private insert(key: number, id: number): void {
    const { index, indexMask } = this;
    let i = key & indexMask;
    while (index[2 * i] !== 0) i = (i + 1) & indexMask;
    index[2 * i] = key;
    index[2 * i + 1] = id;
  }

  /** Takes an id out of the index, moving back the places after it that would no longer be found (linear probing). */
  private remove(key: number, id: number): void {
    const { index, indexMask } = this;
    let i = key & indexMask;
    while (index[2 * i + 1] !== id || index[2 * i] !== key) i = (i + 1) & indexMask;
    for (let j = (i + 1) & indexMask; index[2 * j] !== 0; j = (j + 1) & indexMask) {
      const home = index[2 * j] & indexMask;
      // the entry at j may move to the hole at i unless its home lies cyclically in (i, j]
      if (i <= j ? home > i && home <= j : home > i || home <= j) continue;
      index[2 * i] = index[2 * j];
      index[2 * i + 1] = index[2 * j + 1];
      i = j;
    }
    index[2 * i] = 0;
  }

  /** Room for `capacity` ids: the arrays by id grow (their ids stay), the index is built again twice as large. */
  private grow(capacity: number): void {
    const old = this.capacity;
    const hashWords = new Int32Array(capacity * HASH_WORDS);
    hashWords.set(this.hashWords);
    this.hashWords = hashWords;
    this.keys = grown(this.keys, new Int32Array(capacity));
    this.genOf = grown(this.genOf, new Int32Array(capacity));
    this.state = grown(this.state, new Uint8Array(capacity));
    this.answerIndexes = grown(this.answerIndexes, new Int32Array(capacity));
    this.firstSlot = grown(this.firstSlot, new Int32Array(capacity));
    for (let id = old; id < capacity; id++) {
      this.answers.push(null);
      this.firstChunk.push(null);
    }
    const free = new Int32Array(capacity);
    free.set(this.free.subarray(0, this.freeCount));
    // new ids are taken lowest first
    for (let id = capacity - 1; id >= old; id--) free[this.freeCount++] = id;
    this.free = free;
    for (let id = old; id < capacity; id++) this.genOf[id] = FREE;
    this.capacity = capacity;
    this.index = new Int32Array(capacity * 4);
    this.indexMask = capacity * 2 - 1;
    for (let id = 0; id < old; id++) if (this.genOf[id] !== FREE) this.insert(this.keys[id], id);
  }
}

function grown<T extends Int32Array | Uint8Array>(from: T, to: T): T {
  to.set(from);
  return to;
}
