import type { Database } from 'better-sqlite3';
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
} as const;

/** Keys that define what the file is; setMeta refuses them so that a file never changes environment. */
export const IDENTITY_META_KEYS: ReadonlySet<string> = new Set([
  META_KEYS.application,
  META_KEYS.schemaVersion,
  META_KEYS.envFingerprint,
  META_KEYS.createdAt,
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

export interface Migration {
  /** The schema version the file has after this step. */
  version: number;
  up(db: Database): void;
  /**
   * True when the step only adds what a read never needs (a table written by runs): a read-only open (a dry run)
   * of a file without it goes ahead instead of asking for a writing run first.
   */
  readsWithout?: boolean;
}

/**
 * Version 1. Rowid tables: inserts append, which the measurements show is several times cheaper than a
 * clustered text key. Each index serves one query and is partial where only some rows need it, so that a
 * commit touches as few index pages as possible. There is no index on raw UIDs: it would cost every map
 * commit about 40% for the sake of the rare opt-out tombstoning, which reads rows by id instead.
 */
const SCHEMA_V1 = `
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE entries (
  id                INTEGER PRIMARY KEY,
  type              INTEGER NOT NULL,
  hash              TEXT    NOT NULL,
  status            INTEGER NOT NULL,
  u                 TEXT,
  p                 TEXT,
  r                 INTEGER,
  bucket_id         TEXT,
  first_mapped      INTEGER,
  last_mapped       INTEGER,
  last_optout_check INTEGER,
  opted_out_since   INTEGER,
  due               INTEGER NOT NULL DEFAULT 0,
  UNIQUE (hash, type)
);
-- remap-due: (r, rowid) order over mapped v3 entries only
CREATE INDEX entries_by_r ON entries (r) WHERE r IS NOT NULL;
-- opt-out sweep: least recently checked first, over entries that still hold a raw UID
CREATE INDEX entries_by_optout_check ON entries (last_optout_check, id) WHERE u IS NOT NULL OR p IS NOT NULL;
-- v2: entries of a rotated salt bucket
CREATE INDEX entries_by_bucket ON entries (bucket_id) WHERE bucket_id IS NOT NULL;
-- v2: entries marked due, in id order
CREATE INDEX entries_due_v2 ON entries (due) WHERE due = 1;
CREATE TABLE runs (
  id          INTEGER PRIMARY KEY,
  command     TEXT    NOT NULL,
  args        TEXT    NOT NULL,
  pid         INTEGER NOT NULL,
  started_at  INTEGER NOT NULL,
  finished_at INTEGER,
  summary     TEXT,
  exit_code   INTEGER
);
`;

/**
 * Version 2: the change rows of committed batches that no output has delivered yet. A batch's rows are inserted
 * in the transaction that commits its entries and deleted once the run's output is committed, so a run killed
 * in between leaves them for the next run's output: every change reaches some changes file at least once.
 * `row` is the JSON of a changes-file or verdict row (hashes and raw UIDs, never an email or phone).
 */
const SCHEMA_V2 = `
CREATE TABLE pending_changes (
  id         INTEGER PRIMARY KEY,
  run_id     INTEGER NOT NULL,
  kind       TEXT    NOT NULL,
  row        TEXT    NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE INDEX pending_changes_by_kind ON pending_changes (kind, id);
`;

/** Every step from an empty file to the current schema, in order. */
export const MIGRATIONS: readonly Migration[] = [
  { version: 1, up: (db) => db.exec(SCHEMA_V1) },
  { version: 2, up: (db) => db.exec(SCHEMA_V2), readsWithout: true },
];

export const SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1].version;
