/**
 * Which entries hold a lookup key: the two key levels of the file and the tail of entries appended since the last
 * merge, indexed in memory and merged into the recent level in sorted runs; the recent level is folded into the
 * main one once it holds a quarter as many, so that a merge rewrites a small level (without it merges grow
 * quadratically with the file).
 */
import type { Database } from 'better-sqlite3';
import { sortedUnique } from './id-lists.js';
import { KeyFilter, readKeyFilter, writeKeyFilter } from './key-filter.js';
import { arrayPairs, levelPairs, mergeIntoLevel } from './key-levels.js';
import { BlockBudget, LevelReader } from './level-reader.js';
import { metaNumber, setMetaValue } from './meta-values.js';
import type { RecordWalker } from './record-walk.js';
import { META_KEYS } from './schema.js';
import { TailIndex } from './tail-index.js';

const MIB = 1_048_576;
const LAST_ID = Number.MAX_SAFE_INTEGER;
const TAIL_PAGE = 50_000;
const RECENT_SHARE = 4;
// the keys filter is made for twice the keys it gets (remade at each doubling), at least this many
const FILTER_MIN_CAPACITY = 1_000_000;

export class KeyIndex {
  /** Entries after the levels' last merge, by key; `seen` is the last id it holds. */
  private readonly tail = new TailIndex();
  seen = 0;
  /** The keys filter of the levels up to `upto` (keys_upto), read again when keys_upto moves. */
  private filter: { keys: KeyFilter | null; upto: number } | undefined = undefined;
  private readonly main: LevelReader;
  private readonly recent: LevelReader;

  constructor(
    private readonly db: Database,
    private readonly walker: RecordWalker,
    readonly tailEntries: number,
    keyCacheMiB: number,
  ) {
    const budget = new BlockBudget(Math.max(0, keyCacheMiB * MIB));
    this.main = new LevelReader(db, 'key_blocks', budget);
    this.recent = new LevelReader(db, 'key_blocks_recent', budget);
    this.reset();
  }

  /** Forgets the tail and what was read of the levels; the next lookup or commit reads the tail again (catchUp). */
  reset(): void {
    this.tail.clear();
    this.seen = metaNumber(this.db, META_KEYS.keysUpto) ?? 0;
    this.filter = undefined;
    this.main.forget();
    this.recent.forget();
  }

  get full(): boolean {
    return this.tail.size >= this.tailEntries;
  }

  add(key: number, id: number): void {
    this.tail.add(key, id);
    this.seen = id;
  }

  /** Adds to the tail what was appended since this connection last looked (a whole run's, on a new open). */
  catchUp(): void {
    this.walker.walk(this.seen, LAST_ID, (id, e) => this.add(e.key(), id), TAIL_PAGE);
  }

  /**
   * Inside the caller's transaction: the ids of the entries of these keys, from the levels for the keys the filter
   * lets through, and from the tail. A key is looked for in both levels: another connection may have folded one.
   */
  idsOf(lookupKeys: readonly number[]): number[] {
    // the main level holds the ids up to `mainUpto`, the recent one those after it up to `upto`
    const mainUpto = metaNumber(this.db, META_KEYS.keysMainUpto) ?? 0;
    const upto = metaNumber(this.db, META_KEYS.keysUpto) ?? 0;
    if (this.filter?.upto !== upto) this.filter = { keys: readKeyFilter(this.db, upto), upto };
    const filter = this.filter.keys;
    const probed: number[] = [];
    for (const key of lookupKeys) if (filter === null || filter.mayHave(key)) probed.push(key);
    const ids: number[] = [];
    const onId = (id: number): void => void ids.push(id);
    if (probed.length > 0) {
      const sorted = sortedUnique(probed);
      if (mainUpto > 0) this.main.idsOf(sorted, `${mainUpto}`, onId);
      if (upto > mainUpto) this.recent.idsOf(sorted, `${mainUpto} ${upto}`, onId);
    }
    if (this.tail.size > 0) {
      for (const key of lookupKeys) this.tail.forEach(key, onId);
    }
    return ids;
  }

  /**
   * Moves the tail into the recent level in key order (each block written once per merge), folding the recent
   * level into the main one when due, and empties the tail. In the caller's transaction: `reset` when it fails,
   * which reads the tail again from the file.
   */
  merge(): void {
    this.catchUp();
    const upto = metaNumber(this.db, META_KEYS.keysUpto) ?? 0;
    const { keys, ids } = this.tail.sorted(upto);
    mergeIntoLevel(this.db, 'key_blocks_recent', arrayPairs(keys, ids));
    const newUpto = Math.max(upto, this.seen);
    setMetaValue(this.db, META_KEYS.keysUpto, newUpto);
    const mainUpto = metaNumber(this.db, META_KEYS.keysMainUpto) ?? 0;
    if ((newUpto - mainUpto) * RECENT_SHARE >= mainUpto) {
      mergeIntoLevel(this.db, 'key_blocks', levelPairs(this.db, 'key_blocks_recent'));
      this.db.prepare('DELETE FROM key_blocks_recent').run();
      setMetaValue(this.db, META_KEYS.keysMainUpto, newUpto);
    }
    this.saveFilter(upto, newUpto, keys);
    this.tail.clear();
  }

  /** The filter gets the tail's keys, or one twice as big is filled from the levels; written whole. */
  private saveFilter(upto: number, newUpto: number, keys: Float64Array): void {
    let filter = this.filter?.upto === upto ? this.filter.keys : readKeyFilter(this.db, upto);
    if (filter === null || filter.count + keys.length > filter.capacity) {
      filter = KeyFilter.forCapacity(Math.max(FILTER_MIN_CAPACITY, 2 * newUpto));
      for (const level of ['key_blocks', 'key_blocks_recent'] as const) {
        for (const pairs = levelPairs(this.db, level); pairs.key < Number.POSITIVE_INFINITY; pairs.next()) {
          filter.add(pairs.key);
        }
      }
    } else {
      for (const key of keys) filter.add(key);
    }
    writeKeyFilter(this.db, filter, newUpto);
    this.filter = { keys: filter, upto: newUpto };
  }
}
