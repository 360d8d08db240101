import type { DiiType } from '../identity/index.js';
import type { EntryStatus } from './types.js';

/** Marks a SQLite file as ours: a file without it is someone else's database. */
export const APPLICATION_ID = 'uid2-batch';

export const META_KEYS = {
  application: 'application',
  schemaVersion: 'schema_version',
  envFingerprint: 'env_fingerprint',
  api: 'api',
  createdAt: 'created_at',
  lastBucketsCheck: 'last_buckets_check',
  /** Entries with an id up to this one are in the key levels; later ones are the tail, indexed in memory. */
  keysUpto: 'keys_upto',
  /** Entries with an id up to this one are in the main level; those after it up to keys_upto in the recent one. */
  keysMainUpto: 'keys_main_upto',
  /**
   * The keys filter (table key_filter) holds every key of the entries up to this id; it is used only while this
   * equals keys_upto, so a file merged without it is never read through a stale one.
   */
  filterUpto: 'filter_upto',
  /** The filter's size in 64-byte blocks, and the keys added to it. */
  filterBlocks: 'filter_blocks',
  filterCount: 'filter_count',
  /**
   * The opt-out sweep's cursor: the id of the last entry whose check a sweep committed. The next sweep starts
   * after it, in id order, and wraps to the first entry at the end of the table. Absent: 0.
   */
  sweepAfter: 'sweep_after',
} as const;

/** Keys that define what the file is; setMeta refuses them so that a file never changes environment. */
export const IDENTITY_META_KEYS: ReadonlySet<string> = new Set([
  META_KEYS.application,
  META_KEYS.schemaVersion,
  META_KEYS.envFingerprint,
  META_KEYS.createdAt,
  // the store's own bookkeeping: a wrong value would hide entries from lookups
  META_KEYS.keysUpto,
  META_KEYS.keysMainUpto,
  META_KEYS.filterUpto,
  META_KEYS.filterBlocks,
  META_KEYS.filterCount,
  META_KEYS.sweepAfter,
]);

// Small integers keep rows and indexes compact; the codes are part of the file format.
export const TYPE_CODE: Readonly<Record<DiiType, number>> = { email: 0, phone: 1 };
export const TYPE_OF_CODE: readonly DiiType[] = ['email', 'phone'];

export const STATUS_CODE: Readonly<Record<EntryStatus, number>> = { mapped: 1, optout: 2, invalid: 3 };
const STATUS_OF_CODE: readonly (EntryStatus | undefined)[] = [undefined, 'mapped', 'optout', 'invalid'];

export function statusOfCode(code: number): EntryStatus {
  const status = STATUS_OF_CODE[code];
  if (status === undefined) throw new Error(`unknown entry status code ${code} in the state file`);
  return status;
}

/**
 * The entries table: per entry its id (the order of arrival, which the key levels and due lists hold) and its
 * record, every value of it packed in one blob (entry-record.ts says how). A column per value cost a byte of row
 * header each, and SQL never filters on them: every read goes by id.
 */
const ENTRIES_TABLE = `
CREATE TABLE entries (
  id     INTEGER PRIMARY KEY,
  record BLOB NOT NULL
);
`;

/**
 * The lookup index, one table per level (key-levels.ts): `key_blocks` for the entries up to keys_main_upto,
 * `key_blocks_recent` for those after it up to keys_upto. Each row is a block of sorted (lookup key, id) pairs
 * (key-blocks.ts says how they are packed) keyed by its first key, so a lookup reads the one block whose range
 * holds its key: about 8 bytes a pair instead of a row and an index cell each.
 */
export const KEY_BLOCK_TABLES = `
CREATE TABLE key_blocks (
  first_k INTEGER PRIMARY KEY,
  keys    BLOB NOT NULL
);
CREATE TABLE key_blocks_recent (
  first_k INTEGER PRIMARY KEY,
  keys    BLOB NOT NULL
);
`;

/**
 * A Bloom filter over the keys of both levels, in pieces of up to a MiB: a lookup skips the levels for most keys
 * that are not in them (every key of a first run). Written whole by each merge of the tail.
 */
const KEY_FILTER_TABLE = `
CREATE TABLE key_filter (
  piece INTEGER PRIMARY KEY,
  bits  BLOB NOT NULL
);
`;

/**
 * What remap-due reads instead of an index on r: per UTC day of r (floor(r / 86400)), the ids of the entries that
 * were given an r on that day, in pieces (id-lists.ts: ascending ids as varint gaps). Each commit appends one
 * piece per day its mapped entries fall on. An entry mapped again keeps its id in its old day's list: a reader
 * checks each id against the entry's current r and skips the stale ones, and a day whose list is mostly stale is
 * rewritten without them. Entries without r (v2) are in no list.
 */
export const DUE_LISTS_TABLE = `
CREATE TABLE due_lists (
  day   INTEGER NOT NULL,
  piece INTEGER NOT NULL,
  ids   BLOB    NOT NULL,
  PRIMARY KEY (day, piece)
) WITHOUT ROWID;
`;

/**
 * The change rows of committed batches that no output has delivered yet. A batch's rows are inserted in the
 * transaction that commits its entries and deleted once the run's output is committed, so a run killed in between
 * leaves them for the next run's output: every change reaches some changes file at least once. `row` is the JSON
 * of a changes-file or verdict row (hashes and raw UIDs, never an email or phone); `sum` its checksum (checksum.ts).
 */
const JOURNAL_TABLE = `
CREATE TABLE pending_changes (
  id         INTEGER PRIMARY KEY,
  run_id     INTEGER NOT NULL,
  kind       TEXT    NOT NULL,
  row        TEXT    NOT NULL,
  sum        INTEGER NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE INDEX pending_changes_by_kind ON pending_changes (kind, id);
`;

/**
 * The one format of a state file. Entries are appended (the id is their order of arrival), so a commit of new
 * entries writes a few pages at the end of the table instead of one page per entry; each is one record of its
 * values. Lookups go through two levels of key blocks: per entry, an integer made of the first bits of the hash
 * and the DII type, with the id. New entries reach the recent level in sorted runs (the store merges its tail of
 * recent entries, indexed in memory until then), which rewrites each block once per merge; the recent level is
 * folded into the main one once it holds a quarter as many, so that a merge rewrites a small level and the big
 * one is rewritten rarely (two levels of a log-structured merge). remap-due reads the due lists, and the other
 * walks (the opt-out sweep, counts, v2 salt buckets) read the table in id order: there is no index on entries.
 * Every stored record carries a checksum checked on read (checksum.ts): a meta value, an entry record, a key
 * block, a change row. A run records its wall-clock start and the time it was told to use (`--now`).
 */
export const SCHEMA = `
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL,
  sum   INTEGER NOT NULL
);
${ENTRIES_TABLE}
${KEY_BLOCK_TABLES}
${KEY_FILTER_TABLE}
${DUE_LISTS_TABLE}
CREATE TABLE runs (
  id          INTEGER PRIMARY KEY,
  command     TEXT    NOT NULL,
  args        TEXT    NOT NULL,
  pid         INTEGER NOT NULL,
  started_at  INTEGER NOT NULL,
  now         INTEGER NOT NULL,
  finished_at INTEGER,
  summary     TEXT,
  exit_code   INTEGER
);
${JOURNAL_TABLE}
`;

/**
 * The schema a new file is made at, and the only one this build reads. Files of earlier builds (an older schema,
 * or a meta table without checksums) are refused with how to rebuild them.
 */
export const SCHEMA_VERSION = 2;
