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

/** An entry with every value a state keeps of it (times in seconds but the opt-out's in ms): what `state copy` moves. */
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

/** An entry copied from another state, committed as an answer is. */
export interface CopiedEntry {
  type: DiiType;
  hash: string;
  outcome: { kind: 'record' } & Omit<StateRecord, 'type' | 'hash'>;
}

/**
 * The stored entries of some hashes, as columns (cheap to hand to another thread): entry i is the one of the hash
 * at position `at[i]` of the request; status codes as schema.ts STATUS_CODE; r NaN for none.
 */
export interface StoredEntries {
  at: Int32Array;
  status: Uint8Array;
  due: Uint8Array;
  r: Float64Array;
  u: (string | null)[];
  p: (string | null)[];
  bucketId: (string | null)[];
}

/** An entry due for a remap, with its id. */
export type DueEntry = { id: number } & Pick<StateRecord, 'type' | 'hash' | 'u' | 'p' | 'r' | 'bucketId'>;

/** Where a walk of the due entries stands; the last DueEntry of a page is one. */
export type DueCursor = Pick<DueEntry, 'r' | 'id'>;

export interface DueDay {
  /** YYYY-MM-DD (UTC). */
  day: string;
  count: number;
}

/**
 * An entry whose raw UIDs the opt-out sweep sends, with when it was last checked (null: never); it is also the
 * cursor for the next page.
 */
export type OptoutCandidate = { id: number } & Pick<StateRecord, 'type' | 'hash' | 'u' | 'p' | 'lastOptoutCheckS'>;

/** Where the opt-out sweep stands in id order: the id of the last entry read. An OptoutCandidate is one. */
export type OptoutCursor = Pick<OptoutCandidate, 'id'>;

/** A salt bucket the service reports as rotated (v2), with when (Unix ms). */
export interface RotatedBucket {
  bucketId: string;
  lastUpdatedMs: number;
}

export interface OptedOutRawUid {
  rawUid: string;
  optedOutSinceMs: number;
}

/** What a change row was written for: a remap-due / migrate changes file, or an optout-check --state output. */
export type ChangeKind = 'remap' | 'optout';

/**
 * Change rows journaled with a commit, each the JSON of one output row (never DII); `channel` is the kind, or
 * `kind K/N` for runner K of N.
 */
export interface ChangeJournalRows {
  runId: number;
  channel: string;
  rows: readonly string[];
}

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

export interface EntryTally {
  byStatus: Record<EntryStatus, number>;
  withoutR: number;
  atMost: number[];
}

/** A run as the runs table keeps it. */
export interface StateRun {
  command: string;
  startedAtS: number;
  nowS: number;
  finishedAtS: number | null;
  exitCode: number | null;
}

/** One entry as an export shows it: hashes, raw UIDs, refresh time and status, never a raw email or phone. */
export type ExportedEntry = Pick<StateRecord, 'type' | 'hash' | 'status' | 'u' | 'p' | 'r'>;

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
  /** SQLite page cache of this connection, in MiB (default 8): lookups read pages at random. */
  cacheSizeMiB?: number;
  /**
   * Memory-map up to this many MiB of the file (0: off; default 2047, or UID2_BATCH_STATE_MMAP_MIB). An I/O error
   * on a mapped page ends the process (SIGBUS), so a state on a network mount is better read with 0.
   */
  mmapMiB?: number;
  /** Key blocks that lookups keep in memory once read, in MiB (default 256; 0 keeps none). */
  keyCacheMiB?: number;
  /** Appended entries indexed in memory before a merge into the key levels (default 1,000,000). */
  tailEntries?: number;
}
