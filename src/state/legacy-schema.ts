/** The SQL of schemas 1 to 5: how older files were made, kept to upgrade them and to build them in tests. */

/**
 * Version 1. Rowid tables: inserts append, which the measurements show is several times cheaper than a
 * clustered text key. Each index serves one query and is partial where only some rows need it, so that a
 * commit touches as few index pages as possible. There is no index on raw UIDs: it would cost every map
 * commit about 40% for the sake of the rare opt-out tombstoning, which reads rows by id instead.
 */
export const SCHEMA_V1 = `
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
export const SCHEMA_V2_JOURNAL = `
CREATE TABLE pending_changes (
  id         INTEGER PRIMARY KEY,
  run_id     INTEGER NOT NULL,
  kind       TEXT    NOT NULL,
  row        TEXT    NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE INDEX pending_changes_by_kind ON pending_changes (kind, id);
`;

/** How schemas 1 and 2 wrote an answer: an upsert on the unique (hash, type) text key. */
export const LEGACY_UPSERT = {
  mapped:
    'INSERT INTO entries (type, hash, status, u, p, r, bucket_id, first_mapped, last_mapped, due) ' +
    'VALUES (?, ?, 1, ?, ?, ?, ?, ?, ?, 0) ' +
    'ON CONFLICT (hash, type) DO UPDATE SET status = 1, u = excluded.u, p = excluded.p, r = excluded.r, ' +
    'bucket_id = excluded.bucket_id, first_mapped = coalesce(first_mapped, excluded.first_mapped), ' +
    'last_mapped = excluded.last_mapped, opted_out_since = NULL, due = 0',
  optout:
    'INSERT INTO entries (type, hash, status, opted_out_since, due) VALUES (?, ?, 2, ?, 0) ' +
    'ON CONFLICT (hash, type) DO UPDATE SET status = 2, u = NULL, p = NULL, r = NULL, bucket_id = NULL, due = 0, ' +
    'opted_out_since = coalesce(excluded.opted_out_since, opted_out_since)',
  invalid:
    'INSERT INTO entries (type, hash, status, due) VALUES (?, ?, 3, 0) ' +
    'ON CONFLICT (hash, type) DO UPDATE SET status = 3, u = NULL, p = NULL, r = NULL, bucket_id = NULL, due = 0',
} as const;

/**
 * The entries table of schema 3 under a given name: hashes and raw UIDs as base64 text, and first_mapped. The
 * upgrade from schema 2 builds it beside the old one; the upgrade to schema 4 replaces it.
 */
export function ENTRIES_TABLE_V3(name: string): string {
  return `CREATE TABLE ${name} (
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
  due               INTEGER NOT NULL DEFAULT 0
);`;
}

/** The indexes of schema 3's entries table; the opt-out sweep walked (last_optout_check, id). */
export const ENTRIES_INDEXES_V3 = `
CREATE INDEX entries_by_r ON entries (r) WHERE r IS NOT NULL;
CREATE INDEX entries_by_optout_check ON entries (last_optout_check) WHERE u IS NOT NULL OR p IS NOT NULL;
CREATE INDEX entries_by_bucket ON entries (bucket_id) WHERE bucket_id IS NOT NULL;
CREATE INDEX entries_due_v2 ON entries (due) WHERE due = 1;
`;

/**
 * The lookup index of schemas 3 and 4: a row per entry in one of two tables (`keys` up to keys_main_upto,
 * `keys_recent` after it), which schema 5 packs into key blocks.
 */
export const KEYS_TABLES_V3 = `
CREATE TABLE keys (
  k  INTEGER NOT NULL,
  id INTEGER NOT NULL,
  PRIMARY KEY (k, id)
) WITHOUT ROWID;
CREATE TABLE keys_recent (
  k  INTEGER NOT NULL,
  id INTEGER NOT NULL,
  PRIMARY KEY (k, id)
) WITHOUT ROWID;
`;

/**
 * The entries table of schemas 4 and 5 under a given name (the upgrade to 4 builds it beside the old one): a
 * column per value. `hash`, `u` and `p` hold what stored-bytes.ts storedOf gives: the bytes of a canonical base64
 * text, any other text as it is. BLOB affinity keeps either as it was given.
 */
export function ENTRIES_TABLE_V4(name: string): string {
  return `CREATE TABLE ${name} (
  id                INTEGER PRIMARY KEY,
  type              INTEGER NOT NULL,
  hash              BLOB    NOT NULL,
  status            INTEGER NOT NULL,
  u                 BLOB,
  p                 BLOB,
  r                 INTEGER,
  bucket_id         TEXT,
  last_mapped       INTEGER,
  last_optout_check INTEGER,
  opted_out_since   INTEGER,
  due               INTEGER NOT NULL DEFAULT 0
);`;
}

/** Schemas 4 and 5's indexes on entries: each serves one query and is partial where only some rows need it. */
export const ENTRIES_INDEXES_V4 = `
-- v2: entries of a rotated salt bucket
CREATE INDEX entries_by_bucket ON entries (bucket_id) WHERE bucket_id IS NOT NULL;
-- v2: entries marked due, in id order
CREATE INDEX entries_due_v2 ON entries (due) WHERE due = 1;
`;
