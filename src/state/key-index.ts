/**
 * Which entries hold a lookup key: the two key levels of the file (their filters and blocks) and the tail of
 * entries appended since the last merge, indexed in memory and merged into the levels in sorted runs.
 */
import type { Database } from 'better-sqlite3';
import { sortedUnique } from './id-lists.js';
import { KeyFilter } from './key-filter.js';
import { arrayPairs, clearLevel, forEachLevelKeys, levelPairs, mergeIntoLevel } from './key-levels.js';
import { type LevelFilters, emptyFilter, readLevelFilters, readLevels, writeLevelFilter } from './level-filters.js';
import { BlockBudget, LevelReader } from './level-reader.js';
import { metaNumber, setMetaValue } from './meta-values.js';
import type { RecordWalker } from './record-walk.js';
import { META_KEYS } from './schema.js';
import { TailIndex } from './tail-index.js';

const MIB = 1_048_576;
// the sweep's default upper bound: past any id the table can hold
const LAST_ID = Number.MAX_SAFE_INTEGER;
// tail entries read per page when the tail is read from the file
const TAIL_PAGE = 50_000;
// the recent level is folded into the main one once it holds a quarter as many entries
const RECENT_SHARE = 4;
// the main keys filter is made for twice the keys it gets (so that it is remade at each doubling); the recent one
// for the most the recent level holds before a fold; both for at least this many
const FILTER_MIN_CAPACITY = 1_000_000;

export class KeyIndex {
  /** Entries after the key levels' last merge, by key; `seen` is the last id it holds. */
  private readonly tail = new TailIndex();
  seen = 0;
  /**
   * The keys filters, read on first use; together they hold the key of every entry in a key level that is not in
   * the tail, whatever merges other connections made since (see idsOf).
   */
  private filters: LevelFilters | undefined = undefined;
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
    this.filters = undefined;
    this.readers.main.forget();
    this.readers.recent.forget();
  }

  /** Entries appended after the last merge into the key levels (read from the file if not yet). */
  tailSize(): number {
    this.catchUp();
    return this.tail.size;
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
   * The ids of the entries whose lookup key is one of these, from each key level, for the keys its filter lets
   * through (its LevelReader reads the blocks that may hold them), and from the tail, inside the caller's
   * transaction. A key is looked for in the main level when either filter may hold it: another connection may have
   * folded entries of the recent level into the main one since the filters were read, and those are in the recent
   * filter. Entries it merged into the recent level since are this connection's tail, found there.
   */
  idsOf(lookupKeys: readonly number[]): number[] {
    this.filters ??= readLevelFilters(this.db);
    const { main, recent } = this.filters;
    const inMain: number[] = [];
    const inRecent: number[] = [];
    for (const key of lookupKeys) {
      const mayBeRecent = recent === null || recent.mayHave(key);
      if (mayBeRecent) inRecent.push(key);
      if (mayBeRecent || main === null || main.mayHave(key)) inMain.push(key);
    }
    const ids: number[] = [];
    const onId = (id: number): void => void ids.push(id);
    // the levels' marks: a merge or fold since the last lookup (by any connection) moved them
    const { main: mainMark, upto } = readLevels(this.db);
    if (inMain.length > 0) this.readers.main.idsOf(sortedUnique(inMain), `${mainMark}`, onId);
    if (inRecent.length > 0) this.readers.recent.idsOf(sortedUnique(inRecent), `${mainMark} ${upto}`, onId);
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
    this.saveFilters(upto, newUpto, fold, keys, ids);
    if (fold) {
      mergeIntoLevel(this.db, 'key_blocks', levelPairs(this.db, 'key_blocks_recent'));
      clearLevel(this.db, 'key_blocks_recent');
      setMetaValue(this.db, META_KEYS.keysMainUpto, newUpto);
    }
  }

  /** After the merge's transaction committed: the levels hold the tail. */
  merged(): void {
    this.tail.clear();
  }

  /**
   * Inside the merge's transaction, after the tail's keys went into the recent level and before a fold: keeps each
   * level's filter covering its table and writes what changed. Without a fold the recent filter is written (it
   * grows by the tail's keys), and the main one only if the file has none; a fold adds the recent level's keys to
   * the main filter, writes it, and starts an empty recent one. A filter that does not fit any more (or that the
   * file does not hold) is filled again from its table. A failed transaction reads them back from the file
   * (resetTail).
   */
  private saveFilters(upto: number, newUpto: number, fold: boolean, keys: Float64Array, ids: Float64Array): void {
    const levels = readLevels(this.db);
    // another connection merged since this one read its filters: they no longer describe the file's levels
    if (this.filters === undefined || this.filters.levels.main !== levels.main || this.filters.levels.upto !== upto) {
      this.filters = readLevelFilters(this.db);
    }
    const { main, recent, mainUpto } = this.filters;
    if (!fold) {
      // a file without a usable main filter (none yet, or one whose checksum fails) gets one
      // now rather than at the next fold: until then every key would be looked for in keys
      let mainNow = main;
      let mainNowUpto = mainUpto;
      if (mainNow === null) {
        const filter = KeyFilter.forCapacity(Math.max(FILTER_MIN_CAPACITY, 2 * levels.main));
        forEachLevelKeys(this.db, 'key_blocks', (keys, n) => filter.addAll(keys, n));
        writeLevelFilter(this.db, 'main', filter, 0, levels.main);
        mainNow = filter;
        mainNowUpto = levels.main;
      }
      // a filter shared with the main level is as big as that one: the recent level gets its own
      let next = recent !== null && recent !== main && recent.count + keys.length <= recent.capacity ? recent : null;
      if (next !== null) next.addAll(keys.filter((_, i) => ids[i] > upto));
      if (next === null) {
        const filter = KeyFilter.forCapacity(this.recentCapacity(levels.main));
        forEachLevelKeys(this.db, 'key_blocks_recent', (keys, n) => filter.addAll(keys, n));
        next = filter;
      }
      writeLevelFilter(this.db, 'recent', next, levels.main, newUpto);
      this.filters = {
        main: mainNow,
        recent: next,
        mainUpto: mainNowUpto,
        levels: { main: levels.main, upto: newUpto },
      };
      return;
    }
    // the recent level now holds every entry after the main one: those the main filter does not hold yet join it
    let next = main !== null && main.count + (newUpto - mainUpto) <= main.capacity ? main : null;
    if (next !== null) {
      const filter = next;
      forEachLevelKeys(this.db, 'key_blocks_recent', (keys, n) => filter.addAll(keys, n), mainUpto);
    } else {
      const filter = KeyFilter.forCapacity(Math.max(FILTER_MIN_CAPACITY, 2 * newUpto));
      forEachLevelKeys(this.db, 'key_blocks', (keys, n) => filter.addAll(keys, n));
      forEachLevelKeys(this.db, 'key_blocks_recent', (keys, n) => filter.addAll(keys, n));
      next = filter;
    }
    writeLevelFilter(this.db, 'main', next, 0, newUpto);
    const nextRecent = emptyFilter();
    writeLevelFilter(this.db, 'recent', nextRecent, newUpto, newUpto);
    this.filters = { main: next, recent: nextRecent, mainUpto: newUpto, levels: { main: newUpto, upto: newUpto } };
  }

  /** The keys the recent level holds at most before it is folded: a quarter of the main level, and one tail more. */
  private recentCapacity(main: number): number {
    return Math.max(FILTER_MIN_CAPACITY, Math.ceil(main / RECENT_SHARE) + this.tailEntries);
  }
}
