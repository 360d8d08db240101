import type { DiiType } from '../identity/index.js';

export type EntryStatus = 'mapped' | 'optout' | 'invalid';

/** One stored identifier. Never holds a raw email or phone: the hash is all a remap needs. */
export interface StateEntry {
  /** Row id in the state file; stable for the life of the entry. */
  id: number;
  type: DiiType;
  hash: string;
  status: EntryStatus;
  /** Current raw UID; null for tombstones (optout) and invalids. */
  u: string | null;
  /** Previous raw UID (v3 `p`), null when none. */
  p: string | null;
  /** v3 refresh time, Unix seconds; null for tombstones, invalids and v2 entries. */
  r: number | null;
  /** v2 salt bucket id; null for v3 entries. */
  bucketId: string | null;
  /** When the current raw UID was received (Unix seconds); a tombstone or invalid keeps the last one's time. */
  lastMappedS: number | null;
  lastOptoutCheckS: number | null;
  /** When the service says the raw UID opted out (ms), if known. */
  optedOutSinceMs: number | null;
  /** v2: set when the entry's bucket rotated after it was mapped. */
  due: boolean;
}

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

export interface StateCounts {
  entries: number;
  mapped: number;
  optout: number;
  invalid: number;
  /** Only when counts() was given a time: v3 entries with r <= now plus v2 entries marked due. */
  due?: number;
}

/** What a change row was written for: a remap-due / migrate changes file, or an optout-check --state output. */
export type ChangeKind = 'remap' | 'optout';

/** Change rows journaled with a commit: each is the JSON of one output row (hashes and raw UIDs, never DII). */
export interface ChangeJournalRows {
  runId: number;
  kind: ChangeKind;
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
  /** Read-only (dry runs). */
  readonly?: boolean;
  /** How long to wait for another connection's write to finish before failing (default 5,000 ms). */
  busyTimeoutMs?: number;
  /**
   * SQLite page cache of this connection, in MiB (default 8). It counts in the process's memory. Lookups of stored
   * keys read pages at random across the file, so a bigger cache seldom holds the next one and only adds to the
   * cost of each page read (npm run bench:state with --cache compares sizes).
   */
  cacheSizeMiB?: number;
  /**
   * Memory-map up to this many MiB of the file (0: off). By default 2047, about the most SQLite maps (a state of
   * some 20 million entries), or what the environment variable UID2_BATCH_STATE_MMAP_MIB says. Lookups of stored
   * entries then read their pages in place instead of copying each one out of the system's cache (see npm run
   * bench:state and --mmap), commits are no slower. The pages touched count in the process's RSS, up to the
   * mapped size, though they are the system's file cache, which it takes back when memory runs short, as it would
   * the same pages read without the map. An I/O error on a mapped page ends the process (SIGBUS) instead of
   * failing the call, so a state on storage that may fail under the process (a network mount) is better read with
   * 0; SQLite's WAL needs a local file anyway.
   */
  mmapMiB?: number;
  /**
   * Key blocks (the lookup index's) that lookups keep in memory once read, in MiB (default 256; 0 keeps none). Keys
   * are hashes, so lookups of stored keys at random read every block of a big state sooner or later: kept, a
   * block costs no read from the file when asked again. A state's blocks take about 7 bytes per entry, so the
   * default holds all of them up to about 35 million entries.
   */
  keyCacheMiB?: number;
  /**
   * How many recently appended entries are indexed in memory before they are merged, sorted, into the file's
   * key levels (default 1,000,000). Bigger merges cost fewer page writes per entry and more memory.
   */
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

/**
 * The state file. Every method is synchronous (better-sqlite3) and batch-oriented: each writing method is one
 * transaction, so a crash leaves whole batches or nothing.
 */
export interface StateStore extends StateFile {
  readonly readonly: boolean;

  meta(): StateMeta;
  getMeta(key: string): string | null;
  /** Sets a metadata value (e.g. `last_buckets_check`, `api` after a migration). Identity keys are refused. */
  setMeta(key: string, value: string): void;

  /** Stored entries for these keys, keyed `${type}:${hash}`; keys not stored are absent. */
  lookupMany(keys: readonly { type: DiiType; hash: string }[]): Map<string, StateEntry>;
  /** Stored entries for these hashes of one DII type, keyed by hash; hashes not stored are absent. */
  lookupHashes(type: DiiType, hashes: readonly string[]): Map<string, StateEntry>;

  /**
   * Opens a transaction that the following commitBatch calls join (each still whole or nothing inside it) until
   * endGroup commits them together or abortGroup rolls them all back. Nothing of a group is in the file before
   * endGroup returns: a caller reports its batches committed only then. Lookups inside a group see its batches.
   */
  beginGroup(): void;
  endGroup(): void;
  abortGroup(): void;

  /** Pending change rows of one kind in id order after `afterId` (default 0), at most `limit` (default 5,000). */
  pendingChanges(kind: ChangeKind, afterId?: number, limit?: number): PendingChange[];
  /** The id of the last pending change row of one kind; null when none is pending. */
  lastPendingChangeId(kind: ChangeKind): number | null;
  /** Deletes the pending change rows of one kind up to and including `upToId`, once an output holding them is committed. */
  ackChanges(kind: ChangeKind, upToId: number): number;

  /** v3 entries with r <= nowS. */
  countDue(nowS: number): number;
  /** Entries coming due per day for `days` days: day 0 is today (r <= now), day i is (now + (i-1)d, now + i d]. */
  dueByDay(nowS: number, days: number): DueDay[];
  /** v3 entries with r <= nowS in (r, id) order after `after`, at most `limit`. */
  selectDue(nowS: number, after: DueCursor | null, limit: number): DueEntry[];

  /** v2 entries marked due, in id order after `after`, at most `limit`. */
  selectDueV2(after: number | null, limit: number): DueEntry[];
  countDueV2(): number;
  /** Marks due the v2 entries of these buckets mapped before the rotation; returns how many became due. */
  markBucketsRotated(buckets: readonly RotatedBucket[]): number;
  /**
   * Marks due every mapped v2 entry (one with a salt bucket); v3 entries are left alone, so a migration can start every run with it: what an earlier run already moved to v3 is not sent again.
   */
  markBucketEntriesDue(): number;
  /** Mapped v2 entries (with a salt bucket): how many, and when the oldest of them was mapped (Unix seconds). */
  bucketEntries(): BucketEntries;

  /**
   * Entries with a raw UID (u or p) in id order: after `after` (null: from the first entry) and up to `upTo`
   * (default: the end of the table). A sweep starts after sweepCursor() and wraps to the first entry itself.
   */
  selectForOptoutCheck(limit: number, after: OptoutCursor | null, upTo?: number): OptoutCandidate[];
  /** Where the next sweep starts: after the last entry whose check a sweep committed (id 0 when none). */
  sweepCursor(): OptoutCursor;
  countWithRawUid(): number;
  /** ceil(fraction * countWithRawUid()). */
  sweepSize(fraction: number): number;
  /** Records the check time of these entries; with `cursor`, moves sweepCursor() there in the same transaction. */
  recordOptoutChecks(ids: readonly number[], nowS: number, cursor?: OptoutCursor): void;
  /**
   * Tombstones the entries whose u or p is one of these raw UIDs. With `within` (the ids whose raw UIDs were
   * sent) it reads only those rows; without it, it scans the table once (there is no index on raw UIDs).
   * With `journal`, its rows are inserted into the pending changes in the same transaction.
   */
  tombstoneByRawUid(
    optedOut: readonly OptedOutRawUid[],
    nowS: number,
    within?: readonly number[],
    journal?: ChangeJournalRows,
  ): number;

  /** Entry counts by status (a scan of the table); `due` too when given a time. */
  counts(nowS?: number): StateCounts;

  startRun(command: string, argsJson: string, nowS?: number): number;
  finishRun(id: number, summaryJson: string, exitCode: number, nowS?: number): void;

  /** Takes the lock for a writing run; throws StateLockedError while another live run holds it. */
  lock(): void;
  /**
   * Takes the lock, waiting up to `waitMs` for another live run to release it (polling with growing pauses);
   * rejects with the same StateLockedError as lock() when the time is up.
   */
  waitForLock(waitMs: number): Promise<void>;
  readonly locked: boolean;

  /**
   * Writes the write-ahead log into the file and truncates it, so that the file alone is a full copy; throws
   * StateBusyError when another process reads the file meanwhile.
   */
  checkpoint(): void;
  /** Rebuilds the file without its free pages, then checkpoints. */
  vacuum(): void;
}
