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
  /** Ids up to this one are in the key levels (up to keys_main_upto in the main one); later ones are the tail. */
  keysUpto: 'keys_upto',
  keysMainUpto: 'keys_main_upto',
  /** The keys filter holds every key up to this id; it is used only while this equals keys_upto. */
  filterUpto: 'filter_upto',
  filterBlocks: 'filter_blocks',
  filterCount: 'filter_count',
  /** The id of the last entry whose check an opt-out sweep committed: the next sweep starts after it. */
  sweepAfter: 'sweep_after',
} as const;

/** Keys setMeta refuses: every key but the two a command sets (what the file is, and the store's own bookkeeping). */
export const IDENTITY_META_KEYS: ReadonlySet<string> = new Set(
  Object.values(META_KEYS).filter((key) => key !== META_KEYS.api && key !== META_KEYS.lastBucketsCheck),
);

// part of the file format
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
 * The one format of a state file. `entries`: per entry its id (the order of arrival) and its record, every value
 * packed in one blob (entry-record.ts); entries are appended, so a commit writes a few pages at the end, and every
 * read goes by id. `key_blocks` (entries up to keys_main_upto) and `key_blocks_recent` (up to keys_upto): blocks of
 * sorted (lookup key, id) pairs keyed by their first key (key-blocks.ts), two levels of a log-structured merge
 * (key-index.ts). `key_filter`: a Bloom filter over both levels' keys, in pieces. `due_lists`: per UTC day of r,
 * the ids given an r on that day, in pieces (id-lists.ts), read instead of an index on r; stale ids are skipped
 * and dropped when a day is rewritten. `pending_changes`: change rows of committed batches that no output has
 * delivered yet, inserted with their batch and deleted once an output holding them is committed, so every change
 * reaches some changes file at least once. Every stored value carries a checksum checked on read (checksum.ts).
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

export const SCHEMA = `
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL,
  sum   INTEGER NOT NULL
);
CREATE TABLE entries (
  id     INTEGER PRIMARY KEY,
  record BLOB NOT NULL
);
${KEY_BLOCK_TABLES}
CREATE TABLE key_filter (
  piece INTEGER PRIMARY KEY,
  bits  BLOB NOT NULL
);
CREATE TABLE due_lists (
  day   INTEGER NOT NULL,
  piece INTEGER NOT NULL,
  ids   BLOB    NOT NULL,
  PRIMARY KEY (day, piece)
) WITHOUT ROWID;
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

/** The only schema this build reads: a file of an earlier build is refused with how to rebuild it. */
export const SCHEMA_VERSION = 2;
