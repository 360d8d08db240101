/** The keys filters of the two key tables: read from the file, checked against its levels, and written back. */
import type { Database } from 'better-sqlite3';
import { KeyFilter } from './key-filter.js';
import { withChecksum, withoutChecksum } from './checksum.js';
import { metaNumber, setMetaValue } from './meta-values.js';
import { META_KEYS } from './schema.js';

/** Where the merged entries are: the main level holds the ids up to `main`, the recent one those after it up to `upto`. */
export interface Levels {
  main: number;
  upto: number;
}

/**
 * A filter per key table; null where the file holds none that covers the table (every key is then probed). `levels`
 * are the file's levels the filters were read or written for: the filters cover at least those entries.
 */
export interface LevelFilters {
  main: KeyFilter | null;
  recent: KeyFilter | null;
  /** The highest id whose key the main filter holds (its filter_upto): it may cover recent entries too. */
  mainUpto: number;
  levels: Levels;
}

/** The two tables a filter is stored in and the meta keys that say what it covers. */
const STORED = {
  main: {
    table: 'key_filter',
    from: undefined,
    upto: META_KEYS.filterUpto,
    blocks: META_KEYS.filterBlocks,
    count: META_KEYS.filterCount,
  },
  recent: {
    table: 'key_filter_recent',
    from: META_KEYS.recentFilterFrom,
    upto: META_KEYS.recentFilterUpto,
    blocks: META_KEYS.recentFilterBlocks,
    count: META_KEYS.recentFilterCount,
  },
} as const;
type Level = keyof typeof STORED;

const PIECE_BYTES = 1 << 20;

/** A filter that holds no key: what covers an empty table. */
export function emptyFilter(): KeyFilter {
  return new KeyFilter(1);
}

/** The file's levels now (inside the caller's transaction, so that the tables agree with them). */
export function readLevels(db: Database): Levels {
  return { main: metaNumber(db, META_KEYS.keysMainUpto) ?? 0, upto: metaNumber(db, META_KEYS.keysUpto) ?? 0 };
}

function hasTable(db: Database, table: string): boolean {
  return db.prepare("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?").pluck().get(table) === 1;
}

function readStored(db: Database, level: Level): KeyFilter | null {
  const s = STORED[level];
  if (!hasTable(db, s.table)) return null;
  const pieces: Buffer[] = [];
  for (const stored of db.prepare(`SELECT bits FROM ${s.table} ORDER BY piece`).pluck().all() as Buffer[]) {
    // a damaged piece makes the filter unusable: every key is then probed in the level, as without one
    const bits = withoutChecksum(stored);
    if (bits === null) return null;
    pieces.push(bits);
  }
  return KeyFilter.fromPieces(metaNumber(db, s.blocks) ?? 0, metaNumber(db, s.count) ?? 0, pieces);
}

/**
 * The filters that cover the file's levels, inside the caller's transaction. A filter covers a table when it holds
 * the key of every entry of the table's id range: the main one (every id up to filter_upto) when filter_upto
 * reaches keys_main_upto; the recent one when its range spans the recent level's, or else the main one when it reaches
 * keys_upto (a file written by a version with one filter for both tables). An empty table needs none.
 */
export function readLevelFilters(db: Database): LevelFilters {
  const levels = readLevels(db);
  const mainUpto = metaNumber(db, STORED.main.upto) ?? -1;
  let main: KeyFilter | null = null;
  if (levels.main === 0) main = emptyFilter();
  else if (mainUpto >= levels.main) main = readStored(db, 'main');
  let recent: KeyFilter | null = null;
  if (levels.upto <= levels.main) recent = emptyFilter();
  else if (
    (metaNumber(db, STORED.recent.from) ?? Number.POSITIVE_INFINITY) <= levels.main &&
    (metaNumber(db, STORED.recent.upto) ?? -1) >= levels.upto
  )
    recent = readStored(db, 'recent');
  else if (levels.main > 0 && main !== null && mainUpto >= levels.upto) recent = main;
  return { main, recent, mainUpto: main === null ? -1 : levels.main === 0 ? 0 : mainUpto, levels };
}

/** Writes one level's filter with the id range it covers, inside the caller's transaction. */
export function writeLevelFilter(db: Database, level: Level, filter: KeyFilter, from: number, upto: number): void {
  const s = STORED[level];
  db.exec(`CREATE TABLE IF NOT EXISTS ${s.table} (piece INTEGER PRIMARY KEY, bits BLOB NOT NULL);`);
  db.prepare(`DELETE FROM ${s.table}`).run();
  const insert = db.prepare(`INSERT INTO ${s.table} (piece, bits) VALUES (?, ?)`);
  let piece = 0;
  for (const bits of filter.pieces(PIECE_BYTES)) insert.run(piece++, withChecksum(bits));
  setMetaValue(db, s.blocks, filter.blocks);
  setMetaValue(db, s.count, filter.count);
  if (s.from !== undefined) setMetaValue(db, s.from, from);
  setMetaValue(db, s.upto, upto);
}
