/**
 * What the jobs need of a state wherever it is kept, a SQLite file or a PostgreSQL schema: one interface, every
 * method async so that a database across the network fits it, each writing method one transaction.
 */
import type { DiiType } from '../identity/index.js';
import { TYPE_CODE } from './schema.js';
import type {
  ChangeJournalRows,
  DueCursor,
  DueDay,
  DueEntry,
  EntryTally,
  EntryUpdate,
  ExportedEntry,
  OptedOutRawUid,
  OptoutCandidate,
  OptoutCursor,
  PendingChange,
  StateMeta,
  StateRecord,
  StateRun,
  StoredEntries,
} from './types.js';

export type { StateRecord, StateRun } from './types.js';

/** Where a state is kept. */
export type StateKind = 'file' | 'postgres';

/**
 * How a run holds the state while it writes. A file allows one writing run at a time; a database lets `map` runs
 * write side by side (each commit an upsert) and gives each remap or opt-out sweep a lock of its own share, so two
 * runs never do the same work.
 */
export type StateLockScope =
  | { kind: 'map' }
  | { kind: 'sweep'; command: string; shard?: { index: number; count: number } };

/** A state opened for a run: lookups, commits, the change journal, due entries, opt-out sweeps and runs. */
export interface StateBackend {
  readonly kind: StateKind;
  /** Where the state is, as messages show it: a file's path, or a database URL without its password. */
  readonly where: string;
  readonly readonly: boolean;

  meta(): Promise<StateMeta>;
  getMeta(key: string): Promise<string | null>;
  setMeta(key: string, value: string): Promise<void>;

  /**
   * The stored entries of these hashes of one DII type, in no particular order (`at` gives each answer's position
   * among the hashes); a hash asked twice is answered at one position.
   */
  lookupStored(type: DiiType, hashes: readonly string[]): Promise<StoredEntries>;
  /**
   * Writes one answered batch in one transaction, with its change rows when `journal` is given (with no updates:
   * the change rows alone).
   */
  commitBatch(updates: readonly EntryUpdate[], nowS: number, journal?: ChangeJournalRows): Promise<void>;

  pendingChanges(channel: string, afterId?: number, limit?: number): Promise<PendingChange[]>;
  lastPendingChangeId(channel: string): Promise<number | null>;
  ackChanges(channel: string, upToId: number): Promise<number>;

  /** v3 entries with r <= nowS. */
  countDue(nowS: number): Promise<number>;
  /** Entries coming due per day for `days` days: day 0 is today (r <= now), day i is (now + (i-1)d, now + i d]. */
  dueByDay(nowS: number, days: number): Promise<DueDay[]>;
  /**
   * v3 entries with r <= nowS after `after` (the last of the previous page), at most `limit`, fewer only when no
   * more are due: a file's by day of r, then id (its due lists), a database's in id order (no index holds r).
   */
  selectDue(nowS: number, after: DueCursor | null, limit: number): Promise<DueEntry[]>;
  /** The first UTC day (its 00:00, Unix seconds) with an entry whose r is after `afterS`; null when none. */
  firstDueDay(afterS: number): Promise<number | null>;

  /** Entries with a raw UID in id order, after `after` (null: from the first) and up to `upTo` (default: the end). */
  selectForOptoutCheck(limit: number, after: OptoutCursor | null, upTo?: number): Promise<OptoutCandidate[]>;
  /** Where the next sweep starts: after the last entry whose check a sweep committed (id 0 when none). */
  sweepCursor(): Promise<OptoutCursor>;
  countWithRawUid(): Promise<number>;
  /** Records the check time of these entries; with `cursor`, moves sweepCursor() there in the same transaction. */
  recordOptoutChecks(ids: readonly number[], nowS: number, cursor?: OptoutCursor): Promise<void>;
  /** Tombstones the entries whose u or p is one of these raw UIDs (only among `within` when given); how many. */
  tombstoneByRawUid(
    optedOut: readonly OptedOutRawUid[],
    nowS: number,
    within?: readonly number[],
    journal?: ChangeJournalRows,
  ): Promise<number>;

  startRun(command: string, argsJson: string, nowS: number): Promise<number>;
  finishRun(id: number, summaryJson: string, exitCode: number, nowS: number): Promise<void>;
  lastRun(): Promise<StateRun | null>;

  /** Takes what a writing run holds (StateLockScope); throws StateLockedError while another run holds it. */
  lock(scope: StateLockScope): Promise<void>;

  /**
   * Every entry as an export shows it, in id order; `damaged()` counts those skipped for a failed checksum. A file
   * gives them at once (Iterable), a database as promises.
   */
  entries(): Iterable<ExportedEntry> | AsyncIterable<ExportedEntry>;
  damaged(): number;
  /** The entries by status, those without r, and per bound those with r at most it. */
  tally(bounds: readonly number[]): Promise<EntryTally>;
  /** Pending change rows per channel (each kind, and each share of a kind that sharded runs journaled). */
  pendingChangeCounts(): Promise<Record<string, number>>;

  /**
   * Up to `limit` records in id order after the id `after` (0: from the first), with the id of the last one read:
   * a copy resumes from it.
   */
  readRecords(after: number, limit: number): Promise<{ records: StateRecord[]; last: number }>;
  /** Writes these records as they are (inserted, or replacing the entry of the same type and hash), in one transaction. */
  writeRecords(records: readonly StateRecord[]): Promise<void>;

  /** Releases the lock and closes; idempotent. */
  close(): Promise<void>;
}

/**
 * Refuses update `i` of a commit unless it has a DII type, a hash and an outcome: every kind checks each before its
 * transaction, so that a malformed update fails the batch first.
 */
export function checkUpdate(u: { type: DiiType; hash: string; outcome: object }, i: number): void {
  const valid =
    u !== null &&
    typeof u === 'object' &&
    typeof u.hash === 'string' &&
    TYPE_CODE[u.type] !== undefined &&
    u.outcome !== null &&
    typeof u.outcome === 'object';
  if (!valid) throw new TypeError(`commitBatch: update ${i} has no valid DII type, hash or outcome`);
}
