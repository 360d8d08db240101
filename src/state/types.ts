import type { DiiType } from '../identity/index.js';

export type EntryStatus = 'mapped' | 'optout' | 'invalid';

export type MapOutcome =
  | { kind: 'mapped'; u: string; p: string | null; r: number | null; bucketId?: string | null }
  /** `optedOutSinceMs` when the answer says when (the opt-out endpoint does; map does not). */
  | { kind: 'optout'; optedOutSinceMs?: number | null }
  | { kind: 'invalid' };

export interface EntryUpdate {
  type: DiiType;
  hash: string;
  outcome: MapOutcome;
}

/**
 * An entry with every value a state keeps of it (hashes and raw UIDs as text, times in seconds except the
 * opt-out's in ms): what `state copy` reads from one state and writes to another, so nothing is lost on the way.
 */
export interface StateRecord {
  type: DiiType;
  hash: string;
  status: EntryStatus;
  /** A v2 entry of a rotated salt bucket, marked for remapping. */
  due: boolean;
  u: string | null;
  p: string | null;
  r: number | null;
  bucketId: string | null;
  lastMappedS: number | null;
  lastOptoutCheckS: number | null;
  optedOutSinceMs: number | null;
}

/** An entry copied from another state (`state copy`), committed as an answer is: every value as that state keeps it. */
export interface CopiedEntry {
  type: DiiType;
  hash: string;
  outcome: { kind: 'record' } & Omit<StateRecord, 'type' | 'hash'>;
}

/**
 * What a map run reads of the stored entries of some hashes, column by column (typed arrays and plain strings:
 * cheap to build, and to hand to another thread). Entry i is the one of the hash at position `at[i]` of the
 * request.
 */
export interface StoredEntries {
  at: Int32Array;
  /** The file's status codes (schema.ts STATUS_CODE): 1 mapped, 2 opted out, 3 invalid. */
  status: Uint8Array;
  /** 1: marked due (a v2 entry of a rotated salt bucket). */
  due: Uint8Array;
  /** The refresh time; NaN when the entry has none. */
  r: Float64Array;
  u: (string | null)[];
  p: (string | null)[];
  bucketId: (string | null)[];
}

export interface DueEntry {
  id: number;
  type: DiiType;
  hash: string;
  u: string | null;
  p: string | null;
  r: number | null;
  bucketId: string | null;
}

/** Where a walk through the `r` index stands; the last DueEntry of a page is one. */
export interface DueCursor {
  r: number | null;
  id: number;
}

/** How many entries come due on one UTC day. */
export interface DueDay {
  /** YYYY-MM-DD (UTC). */
  day: string;
  count: number;
}

/** An entry whose raw UIDs the opt-out sweep sends; it is also the cursor for the next page. */
export interface OptoutCandidate {
  id: number;
  /** The entry's DII type and hash: how the sweep's output names the entry to the user. */
  type: DiiType;
  hash: string;
  u: string | null;
  p: string | null;
  /** When the entry was last checked (Unix seconds); null when never. */
  lastOptoutCheckS: number | null;
}

/** Where the opt-out sweep stands in id order: the id of the last entry read. An OptoutCandidate is one. */
export interface OptoutCursor {
  id: number;
}

/** A salt bucket the service reports as rotated (v2). */
export interface RotatedBucket {
  bucketId: string;
  /** When the bucket's salt last rotated, Unix ms. */
  lastUpdatedMs: number;
}

/** The mapped v2 entries of a state file, in brief. */
export interface BucketEntries {
  count: number;
  /** last_mapped of the oldest one; null when there are none. */
  oldestMappedS: number | null;
}

/** A raw UID the opt-out endpoint reports as opted out. */
export interface OptedOutRawUid {
  rawUid: string;
  optedOutSinceMs: number;
}

/** What a change row was written for: a remap-due / migrate changes file, or an optout-check --state output. */
export type ChangeKind = 'remap' | 'optout';

/** Change rows journaled with a commit: each is the JSON of one output row (hashes and raw UIDs, never DII). */
export interface ChangeJournalRows {
  runId: number;
  /** Whose rows (pipeline/run/change-journal.ts): the kind, or `kind K/N` for runner K of N. */
  channel: string;
  rows: readonly string[];
}

/** A journaled change row that no committed output has delivered yet. */
export interface PendingChange {
  id: number;
  row: string;
}

export interface StateMeta {
  schemaVersion: number;
  /** Base URL + identity scope the file was made with; integ and prod IDs are never mixed. */
  envFingerprint: string;
  api: 'v3' | 'v2';
  createdAt: string;
}

/** One entry as an export shows it: hashes, raw UIDs, refresh time and status, never a raw email or phone. */
export interface ExportedEntry {
  type: DiiType;
  hash: string;
  status: EntryStatus;
  u: string | null;
  p: string | null;
  r: number | null;
}

export interface OpenStateOptions {
  /** Refuse a file made for another environment. */
  envFingerprint: string;
  /** API the entries come from when the file is created (default v3). */
  api?: 'v3' | 'v2';
  /** Create the file when missing (default true). */
  create?: boolean;
  /** When a state created now says it was created (default now): a copy keeps its source's. */
  createdAt?: string;
  /** Read-only (dry runs). */
  readonly?: boolean;
  /** Read a state of any environment as it is (`state info`, `export`): only reading methods work then. */
  anyEnvironment?: boolean;
  /** How long to wait for another connection's write to finish before failing (default 5,000 ms). */
  busyTimeoutMs?: number;
  /** SQLite page cache of this connection, in MiB (default 8): lookups read pages at random, so more seldom helps. */
  cacheSizeMiB?: number;
  /**
   * Memory-map up to this many MiB of the file (0: off; default 2047, about the most SQLite maps, or
   * UID2_BATCH_STATE_MMAP_MIB): lookups read pages in place instead of copying them. Mapped pages count in RSS
   * though the system takes them back as it would its file cache, and an I/O error on one ends the process
   * (SIGBUS), so a state on a network mount is better read with 0.
   */
  mmapMiB?: number;
  /**
   * Key blocks that lookups keep in memory once read, in MiB (default 256; 0 keeps none): keys are hashes, so
   * lookups at random read every block of a big state sooner or later.
   */
  keyCacheMiB?: number;
  /** Appended entries indexed in memory before a merge into the key levels (default 1,000,000). */
  tailEntries?: number;
}

/** What a program that maps with a state file holds of it (the library's openStateFor): lookups, commits, close. */
export interface StateFile {
  readonly path: string;
  /**
   * The stored entries of these hashes of one DII type, as columns of only what a map run reads, in no particular
   * order (`at` gives each answer's position among the hashes); a hash asked twice is answered at one position.
   */
  lookupStored(type: DiiType, hashes: readonly string[]): StoredEntries;
  /**
   * Writes one answered batch (any size) in one transaction; with `journal`, its change rows are inserted into
   * the pending changes in the same transaction, so they exist exactly when the batch is committed.
   */
  commitBatch(updates: readonly EntryUpdate[], nowS: number, journal?: ChangeJournalRows): void;
  /** Releases the lock and closes the file; a writing store checkpoints first (no big -wal left beside it). Idempotent. */
  close(): void;
}
