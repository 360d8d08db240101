/**
 * Which entries hold a lookup key: the two key levels of the file (their filters and blocks) and the tail of
 * entries appended since the last merge, indexed in memory and merged into the levels in sorted runs.
 */
import type { Database } from 'better-sqlite3';
import { sortedUnique } from './id-lists.js';
import { KeyFilter, readKeyFilter, writeKeyFilter } from './key-filter.js';
import { arrayPairs, clearLevel, forEachLevelKeys, levelPairs, mergeIntoLevel, readLevels } from './key-levels.js';
import { BlockBudget, LevelReader } from './level-reader.js';
import { metaNumber, setMetaValue } from './meta-values.js';
import type { RecordWalker } from './record-walk.js';
import { META_KEYS } from './schema.js';
import { TailIndex } from './tail-index.js';

const MIB = 1_048_576;
const LAST_ID = Number.MAX_SAFE_INTEGER;
// tail entries read per page when the tail is read from the file
const TAIL_PAGE = 50_000;
// the recent level is folded into the main one once it holds a quarter as many entries
const RECENT_SHARE = 4;
// the keys filter is made for twice the keys it gets (so that it is remade at each doubling), at least this many
const FILTER_MIN_CAPACITY = 1_000_000;

export class KeyIndex {
  /** Entries after the key levels' last merge, by key; `seen` is the last id it holds. */
  private readonly tail = new TailIndex();
  seen = 0;
  /** The keys filter of the levels up to `upto` (keys_upto), read on first use and again when keys_upto moves. */
  private filter: { keys: KeyFilter | null; upto: number } | undefined = undefined;
  /** Readers of the two levels' key blocks, with the blocks they keep in memory. */
  private readonly readers: { main: LevelReader; recent: LevelReader };

  constructor(
    private readonly db: Database,
    private readonly walker: RecordWalker,
    /** How long the tail grows before it is merged. */
    readonly tailEntries: number,
    keyCacheMiB: number,
  ) {
    const budget = new BlockBudget(Math.max(0, keyCacheMiB * MIB));
    this.readers = {
      main: new LevelReader(db, 'key_blocks', budget),
      recent: new LevelReader(db, 'key_blocks_recent', budget),
    };
    this.reset();
  }

  /**
   * Forgets the in-memory tail and what was read of the levels (on open, and after a failed transaction, which may
   * have written them); the first lookup or commit reads the tail again from the file. Not before: a connection
   * that only records runs or reads meta never needs it.
   */
  reset(): void {
    this.tail.clear();
    this.seen = metaNumber(this.db, META_KEYS.keysUpto) ?? 0;
    this.filter = undefined;
    this.readers.main.forget();
    this.readers.recent.forget();
  }

  /** Whether the tail is long enough to be merged. */
  get full(): boolean {
    return this.tail.size >= this.tailEntries;
  }

  /** An entry this connection appended. */
  add(key: number, id: number): void {
    this.tail.add(key, id);
    this.seen = id;
  }

  /**
   * Adds to the tail what other connections appended since this one last looked (empty in a single run, a whole
   * run's entries when a file is opened again).
   */
  catchUp(): void {
    this.walker.walk(this.seen, LAST_ID, (id, e) => this.add(e.key(), id), TAIL_PAGE);
  }

  /**
   * The ids of the entries whose lookup key is one of these, from the key levels, for the keys the filter lets
   * through (each level's LevelReader reads the blocks that may hold them), and from the tail, inside the caller's
   * transaction. The filter is read again whenever a merge (by any connection) moved keys_upto since.
   */
  idsOf(lookupKeys: readonly number[]): number[] {
    const { main, upto } = readLevels(this.db);
    if (this.filter?.upto !== upto) this.filter = { keys: readKeyFilter(this.db, upto), upto };
    const filter = this.filter.keys;
    const probed: number[] = [];
    for (const key of lookupKeys) if (filter === null || filter.mayHave(key)) probed.push(key);
    const ids: number[] = [];
    const onId = (id: number): void => void ids.push(id);
    if (probed.length > 0) {
      const sorted = sortedUnique(probed);
      // the marks name what a level reader read: a merge or fold moved them
      if (main > 0) this.readers.main.idsOf(sorted, `${main}`, onId);
      if (upto > main) this.readers.recent.idsOf(sorted, `${main} ${upto}`, onId);
    }
    if (this.tail.size > 0) {
      for (const key of lookupKeys) this.tail.forEach(key, onId);
    }
    return ids;
  }

  /**
   * Moves the tail into the recent level in key order, so that each of its blocks is written once per merge
   * instead of once per entry, with the new high-water mark; folds the recent level into the main one once it
   * holds a quarter as many entries. In the caller's transaction: the caller empties the tail once it commits
   * (`merged`), or resets it when it fails.
   */
  merge(): void {
    this.catchUp();
    const upto = metaNumber(this.db, META_KEYS.keysUpto) ?? 0;
    const { keys, ids } = this.tail.sorted();
    mergeIntoLevel(this.db, 'key_blocks_recent', arrayPairs(keys, ids, upto));
    const newUpto = Math.max(upto, this.seen);
    setMetaValue(this.db, META_KEYS.keysUpto, newUpto);
    // ids are dense: entries up to keys_main_upto are in the main level, the rest up to keys_upto in the recent one
    const mainUpto = metaNumber(this.db, META_KEYS.keysMainUpto) ?? 0;
    const fold = (newUpto - mainUpto) * RECENT_SHARE >= mainUpto;
    if (fold) {
      mergeIntoLevel(this.db, 'key_blocks', levelPairs(this.db, 'key_blocks_recent'));
      clearLevel(this.db, 'key_blocks_recent');
      setMetaValue(this.db, META_KEYS.keysMainUpto, newUpto);
    }
    this.saveFilter(upto, newUpto, keys, ids);
  }

  /** After the merge's transaction committed: the levels hold the tail. */
  merged(): void {
    this.tail.clear();
  }

  /**
   * Inside the merge's transaction, once the levels hold the tail: the filter that held every key up to `upto`
   * gets the tail's keys, or, when the file holds none or it would pass its capacity, one twice as big is filled
   * from the levels; written whole. A failed transaction reads it back from the file (reset).
   */
  private saveFilter(upto: number, newUpto: number, keys: Float64Array, ids: Float64Array): void {
    let filter = this.filter?.upto === upto ? this.filter.keys : readKeyFilter(this.db, upto);
    if (filter !== null && filter.count + keys.length <= filter.capacity) {
      filter.addAll(keys.filter((_, i) => ids[i] > upto));
    } else {
      const made = KeyFilter.forCapacity(Math.max(FILTER_MIN_CAPACITY, 2 * newUpto));
      forEachLevelKeys(this.db, 'key_blocks', (k, n) => made.addAll(k, n));
      forEachLevelKeys(this.db, 'key_blocks_recent', (k, n) => made.addAll(k, n));
      filter = made;
    }
    writeKeyFilter(this.db, filter, newUpto);
    this.filter = { keys: filter, upto: newUpto };
  }
}
