import type { Database } from 'better-sqlite3';
import type { DiiType } from '../identity/index.js';
import { sortedUnique } from './id-lists.js';
import { BatchWriter, encodeUpdates, requestsByKey, TOMBSTONE, timeOrNull } from './batch-commit.js';
import { DueLists, decodeDue, pageLimit } from './due-lists.js';
import { KeyIndex } from './key-index.js';
import { keyOf } from './lookup-key.js';
import { StateBusyError, StateLockedError, StateReadonlyError, StateFormatError } from './errors.js';
import { StateLock } from './lock.js';
import { ChecksumError, checksumOf } from './checksum.js';
import { metaValue, setMetaValue } from './meta-values.js';
import { type EntryView, type EntryValues, orNull, RecordWriter } from './entry-record.js';
import { LIST_PAGE, prepared, SQL } from './queries.js';
import { RecordWalker, WALK_PAGE } from './record-walk.js';
import { IDENTITY_META_KEYS, META_KEYS, statusOfCode, TYPE_CODE, TYPE_OF_CODE } from './schema.js';
import type {
  ChangeJournalRows,
  CopiedEntry,
  DueCursor,
  DueDay,
  DueEntry,
  EntryStatus,
  EntryTally,
  EntryUpdate,
  ExportedEntry,
  OptedOutRawUid,
  OptoutCandidate,
  OptoutCursor,
  PendingChange,
  RotatedBucket,
  StateMeta,
  StateRecord,
  StateRun,
  StoredEntries,
} from './types.js';

const LAST_ID = Number.MAX_SAFE_INTEGER;
const DEFAULT_TAIL_ENTRIES = 1_000_000;
const DEFAULT_KEY_CACHE_MIB = 256;
// a lookup of at least NEIGHBOUR_MIN_KEYS keys first finds the ids of NEIGHBOUR_SAMPLE of them; a range of ids
// holding at least NEIGHBOUR_MIN_HITS of those, and at most NEIGHBOUR_READS_PER_KEY entries per request it
// stands for, is read whole (a lookup in a key level costs several entries of a range)
const NEIGHBOUR_MIN_KEYS = 256;
const NEIGHBOUR_SAMPLE = 16;
const NEIGHBOUR_READS_PER_KEY = 4;
const NEIGHBOUR_MIN_HITS = 4;

/** Gives back the request the entry answers, or -1. */
type OnAnswer = (id: number, entry: EntryView) => number;

/** What a program that maps with a state file holds of it (the library's openStateFor). */
export interface StateFile {
  readonly path: string;
  lookupStored(type: DiiType, hashes: readonly string[]): StoredEntries;
  /** One answered batch in one transaction, with its change rows when `journal` is given. */
  commitBatch(updates: readonly EntryUpdate[], nowS: number, journal?: ChangeJournalRows): void;
  /** Releases the lock and closes the file, checkpointed. Idempotent. */
  close(): void;
}

/** The state file over one connection, made by openState; each writing method is one transaction. */
export class StateStore implements StateFile {
  private readonly walker: RecordWalker;
  private readonly writer: BatchWriter;
  private readonly due: DueLists;
  private readonly keys: KeyIndex;
  private readonly lockFile: StateLock;
  private lockRefused = false;
  private closed = false;
  private damagedEntries = 0;

  constructor(
    private readonly db: Database,
    readonly path: string,
    readonly readonly: boolean,
    tailEntries = DEFAULT_TAIL_ENTRIES,
    keyCacheMiB = DEFAULT_KEY_CACHE_MIB,
  ) {
    this.walker = new RecordWalker(db);
    this.lockFile = new StateLock(path);
    this.due = new DueLists(db, this.walker, readonly);
    this.keys = new KeyIndex(db, this.walker, Math.max(1, Math.floor(tailEntries)), keyCacheMiB);
    this.writer = new BatchWriter(db, path, this.keys, this.due, (keys, hashOf, onMatch) =>
      this.forEachStored(keys, hashOf, onMatch),
    );
  }

  meta(): StateMeta {
    return {
      schemaVersion: Number(this.getMeta(META_KEYS.schemaVersion)),
      envFingerprint: this.getMeta(META_KEYS.envFingerprint) ?? '',
      api: this.getMeta(META_KEYS.api) === 'v2' ? 'v2' : 'v3',
      createdAt: this.getMeta(META_KEYS.createdAt) ?? '',
    };
  }

  getMeta(key: string): string | null {
    return metaValue(this.db, key) ?? null;
  }

  /** Sets a metadata value (e.g. `last_buckets_check`, `api` after a migration). Identity keys are refused. */
  setMeta(key: string, value: string): void {
    this.writable(`set ${key}`);
    if (IDENTITY_META_KEYS.has(key))
      throw new StateFormatError(
        `state file ${this.path}: '${key}' says what the file is and cannot be changed`,
        this.path,
      );
    if (key === META_KEYS.api && value !== 'v2' && value !== 'v3')
      throw new StateFormatError(`state file ${this.path}: api must be v2 or v3, not '${value}'`, this.path);
    setMetaValue(this.db, key, value);
  }

  lookupStored(type: DiiType, hashes: readonly string[]): StoredEntries {
    const n = hashes.length;
    const at = new Int32Array(n);
    const status = new Uint8Array(n);
    const due = new Uint8Array(n);
    const r = new Float64Array(n);
    const found: Pick<StoredEntries, 'u' | 'p' | 'bucketId'> = { u: [], p: [], bucketId: [] };
    if (n > 0) {
      this.keys.catchUp();
      const code = TYPE_CODE[type];
      const onMatch = (i: number, _: number, e: EntryView): void => {
        const k = found.u.length;
        at[k] = i;
        status[k] = e.status;
        due[k] = e.due;
        r[k] = e.r;
        found.u.push(e.text(e.uStart, e.uSize));
        found.p.push(e.text(e.pStart, e.pSize));
        found.bucketId.push(e.text(e.bucketStart, e.bucketSize));
      };
      const lookupKeys = hashes.map((hash) => keyOf(code, hash));
      this.read(() => this.forEachStored(lookupKeys, (i) => hashes[i], onMatch));
    }
    const k = found.u.length;
    return { at: at.slice(0, k), status: status.slice(0, k), due: due.slice(0, k), r: r.slice(0, k), ...found };
  }

  /** Inside a transaction: each stored entry of these keys, given with the request of its key and hash. */
  private forEachStored(
    lookupKeys: readonly number[],
    hashOf: (request: number) => string,
    onMatch: (request: number, id: number, e: EntryView) => void,
  ): void {
    const { lastWith, before } = requestsByKey(lookupKeys);
    this.readAnswersByKeys(lookupKeys, (id, e) => {
      for (let i = lastWith.get(e.key()) ?? -1; i >= 0; i = before[i]) {
        if (e.holdsHash(hashOf(i))) {
          onMatch(i, id, e);
          return i;
        }
      }
      return -1;
    });
  }

  /**
   * The entries of these keys read joined (one row per statement). A file mapped again asks for one committed
   * batch at a time, whose ids are close together while their keys are spread over the main level: where a
   * sample of the keys finds ids close together, that id range is read whole first, and only the requests left
   * unanswered go through the key levels.
   */
  private readAnswersByKeys(lookupKeys: readonly number[], onAnswer: OnAnswer): void {
    const n = lookupKeys.length;
    let asked = lookupKeys;
    let read: { from: number; to: number } | null = null;
    if (n >= NEIGHBOUR_MIN_KEYS) {
      const sampleKeys: number[] = [];
      for (let k = 0; k < NEIGHBOUR_SAMPLE; k++)
        sampleKeys.push(lookupKeys[Math.floor(((k + 0.5) * n) / NEIGHBOUR_SAMPLE)]);
      read = denseSpan(sortedUnique(this.keys.idsOf(sampleKeys)), n);
    }
    if (read !== null) {
      const answered = new Uint8Array(n);
      const onRange = (id: number, e: EntryView): void => {
        const i = onAnswer(id, e);
        if (i >= 0) answered[i] = 1;
      };
      this.walker.walk(read.from - 1, read.to, onRange, LIST_PAGE);
      asked = lookupKeys.filter((_, i) => answered[i] === 0);
    }
    // a sample that found no range is looked up again with the rest: a few keys of thousands
    let ids = this.keys.idsOf(asked);
    if (read !== null) {
      const { from, to } = read;
      ids = ids.filter((id) => id < from || id > to);
    }
    this.walker.listed(sortedUnique(ids), onAnswer);
  }

  /**
   * `read` in one read transaction (or in the caller's), so that the tables read are seen in one state even while
   * another connection merges.
   */
  private read<T>(read: () => T): T {
    return this.db.inTransaction ? read() : this.db.transaction(read)();
  }

  commitBatch(updates: readonly (EntryUpdate | CopiedEntry)[], nowS: number, journal?: ChangeJournalRows): void {
    this.writable('commit a batch');
    if (updates.length === 0 && journal === undefined) return;
    const encoded = encodeUpdates(updates);
    try {
      const now = Math.floor(nowS);
      this.db
        .transaction(() => {
          this.writer.write(encoded, now);
          if (journal !== undefined) this.insertJournal(journal, now);
        })
        .immediate();
      if (this.keys.full) {
        this.db.transaction(() => this.keys.merge()).immediate();
      }
    } catch (err) {
      // what the failed transaction wrote was rolled back: so must the tail entries it added or merged be
      this.keys.reset();
      throw err;
    }
  }

  /** Opens a transaction that the following commitBatch calls join until endGroup or abortGroup. */
  beginGroup(): void {
    this.writable('commit batches');
    if (this.db.inTransaction) throw new Error(`state file ${this.path}: a group of commits is already open`);
    this.db.exec('BEGIN IMMEDIATE');
  }

  endGroup(): void {
    if (!this.db.inTransaction) return;
    try {
      this.db.exec('COMMIT');
    } catch (err) {
      this.abortGroup();
      throw err;
    }
  }

  abortGroup(): void {
    // SQLite may have rolled back already (a full disk does)
    if (this.db.inTransaction) this.db.exec('ROLLBACK');
    this.keys.reset();
  }

  /** Pending change rows of one channel in id order after `afterId`, at most `limit`. */
  pendingChanges(channel: string, afterId = 0, limit = 5_000): PendingChange[] {
    const n = pageLimit(limit);
    if (n === 0) return [];
    const rows = prepared(this.db, SQL.pendingChanges).raw().all(channel, afterId, n) as [number, string, number][];
    return rows.map(([id, row, sum]) => {
      if (sum !== checksumOf(row)) throw new ChecksumError('a pending change row');
      return { id, row };
    });
  }

  pendingChangeCounts(): Record<string, number> {
    return Object.fromEntries(prepared(this.db, SQL.pendingChangeCounts).raw().all() as [string, number][]);
  }

  lastPendingChangeId(channel: string): number | null {
    return (prepared(this.db, SQL.lastPendingChange).pluck().get(channel) as number | null | undefined) ?? null;
  }

  /** Deletes a channel's pending change rows up to `upToId` once an output holding them is committed. */
  ackChanges(channel: string, upToId: number): number {
    this.writable('acknowledge delivered changes');
    return prepared(this.db, SQL.ackChanges).run(channel, upToId).changes;
  }

  private insertJournal(journal: ChangeJournalRows, nowS: number): void {
    const insert = prepared(this.db, SQL.insertPendingChange);
    for (const row of journal.rows) insert.run(journal.runId, journal.channel, row, checksumOf(row), nowS);
  }

  countDue(nowS: number): number {
    return this.due.byDay(nowS, 1)[0].count;
  }

  dueByDay(nowS: number, days: number): DueDay[] {
    return this.due.byDay(nowS, days);
  }

  selectDue(nowS: number, after: DueCursor | null, limit: number): DueEntry[] {
    return this.read(() => this.due.select(nowS, after, limit));
  }

  /** v2 entries marked due, in id order after `after`, at most `limit`. */
  selectDueV2(after: number | null, limit: number): DueEntry[] {
    const due = (id: number, e: EntryView): DueEntry | undefined => (e.due === 1 ? decodeDue(id, e) : undefined);
    return this.collect(after ?? 0, LAST_ID, limit, due, WALK_PAGE);
  }

  countDueV2(): number {
    return this.count((e) => e.due === 1);
  }

  private count(which: (e: EntryView) => boolean): number {
    let count = 0;
    this.walk(0, LAST_ID, (_, e) => {
      if (which(e)) count++;
    });
    return count;
  }

  /** Marks due the v2 entries of these buckets mapped before the rotation; returns how many became due. */
  markBucketsRotated(buckets: readonly RotatedBucket[]): number {
    this.writable('mark rotated buckets');
    if (buckets.length === 0) return 0;
    const rotated = new Map<string, number>();
    for (const b of buckets) rotated.set(b.bucketId, Math.max(rotated.get(b.bucketId) ?? -Infinity, b.lastUpdatedMs));
    // last_mapped is in seconds and last_updated in ms: an entry mapped in the rotation's second counts as before it
    const due = (e: EntryView): boolean => {
      const since = e.bucketSize < 0 ? undefined : rotated.get(e.text(e.bucketStart, e.bucketSize) ?? '');
      return since !== undefined && (Number.isNaN(e.lastMappedS) || e.lastMappedS * 1000 < since);
    };
    return this.db.transaction(() => this.markDue(due)).immediate();
  }

  /** Marks due every mapped v2 entry (one with a salt bucket): what a migration moved to v3 is left alone. */
  markBucketEntriesDue(): number {
    this.writable('mark entries due');
    return this.db.transaction(() => this.markDue((e) => e.bucketSize >= 0)).immediate();
  }

  private markDue(which: (e: EntryView) => boolean): number {
    const writer = new RecordWriter();
    let marked = 0;
    this.walker.walk(0, LAST_ID, (id, e) => {
      if (e.status !== 1 || e.due === 1 || !which(e)) return;
      this.rewrite(writer, id, e, { due: true });
      marked++;
    });
    return marked;
  }

  /** Mapped v2 entries (with a salt bucket): how many, and when the oldest of them was mapped (Unix seconds). */
  bucketEntries(): { count: number; oldestMappedS: number | null } {
    let count = 0;
    let oldest = Number.POSITIVE_INFINITY;
    this.walk(0, LAST_ID, (_, e) => {
      if (e.bucketSize < 0) return;
      count++;
      if (e.lastMappedS < oldest) oldest = e.lastMappedS;
    });
    return { count, oldestMappedS: Number.isFinite(oldest) ? oldest : null };
  }

  /** Up to `limit` entries in id order after the id `after`, with every value each holds (state copy). */
  records(after: number, limit: number): { id: number; record: StateRecord }[] {
    return this.collect(after, LAST_ID, limit, (id, e) => ({ id, record: e.record() }));
  }

  /** Up to `limit` of what `pick` gives for the entries in (after, upTo], in id order. */
  private collect<T>(
    after: number,
    upTo: number,
    limit: number,
    pick: (id: number, e: EntryView) => T | undefined,
    page?: number,
  ): T[] {
    const n = pageLimit(limit);
    const out: T[] = [];
    if (n === 0) return out;
    const onRecord = (id: number, e: EntryView): boolean => {
      const item = pick(id, e);
      if (item !== undefined) out.push(item);
      return out.length < n;
    };
    this.walk(after, upTo, onRecord, page ?? Math.min(WALK_PAGE, Math.max(16, n)));
    return out;
  }

  private rewrite(writer: RecordWriter, id: number, e: EntryView, change: Partial<EntryValues>): void {
    prepared(this.db, SQL.updateRecord).run(writer.write({ ...e.values(), ...change }), id);
  }

  /** A walk of the table in one read transaction, so that its pages see one state of the file. */
  private walk(after: number, upTo: number, onRecord: (id: number, e: EntryView) => unknown, page?: number): void {
    this.read(() => this.walker.walk(after, upTo, onRecord, page));
  }

  /** Entries with a raw UID in id order, after `after` (null: from the first) and up to `upTo`. */
  selectForOptoutCheck(limit: number, after: OptoutCursor | null, upTo: number = LAST_ID): OptoutCandidate[] {
    const withRawUid = (id: number, e: EntryView): OptoutCandidate | undefined =>
      e.uSize >= 0 || e.pSize >= 0 ? decodeCandidate(id, e) : undefined;
    return this.collect(after?.id ?? 0, upTo, limit, withRawUid);
  }

  sweepCursor(): OptoutCursor {
    const id = Number(this.getMeta(META_KEYS.sweepAfter) ?? 0);
    return { id: Number.isSafeInteger(id) && id > 0 ? id : 0 };
  }

  countWithRawUid(): number {
    return this.count((e) => e.uSize >= 0 || e.pSize >= 0);
  }

  recordOptoutChecks(ids: readonly number[], nowS: number, cursor?: OptoutCursor): void {
    this.writable('record opt-out checks');
    if (ids.length === 0 && cursor === undefined) return;
    const now = Math.floor(nowS);
    this.db
      .transaction(() => {
        const writer = new RecordWriter();
        this.walker.listed(sortedUnique(ids), (id, e) => this.rewrite(writer, id, e, { lastOptoutCheckS: now }));
        if (cursor !== undefined) setMetaValue(this.db, META_KEYS.sweepAfter, cursor.id);
      })
      .immediate();
  }

  /** Tombstones the entries whose u or p is one of these raw UIDs: among `within`, or in a walk of the table. */
  tombstoneByRawUid(
    optedOut: readonly OptedOutRawUid[],
    nowS: number,
    within?: readonly number[],
    journal?: ChangeJournalRows,
  ): number {
    this.writable('tombstone opted-out entries');
    if (optedOut.length === 0) return 0;
    const now = Math.floor(nowS);
    const since = new Map(optedOut.map((o) => [o.rawUid, o.optedOutSinceMs] as const));
    const writer = new RecordWriter();
    let changed = 0;
    const check = (id: number, e: EntryView): void => {
      if (e.uSize < 0 && e.pSize < 0) return;
      const u = e.text(e.uStart, e.uSize);
      const p = e.text(e.pStart, e.pSize);
      const sinceMs = (u !== null ? since.get(u) : undefined) ?? (p !== null ? since.get(p) : undefined);
      if (sinceMs === undefined) return;
      this.rewrite(writer, id, e, { ...TOMBSTONE, optedOutSinceMs: timeOrNull(sinceMs), lastOptoutCheckS: now });
      changed++;
    };
    return this.db
      .transaction(() => {
        if (within === undefined) this.walker.walk(0, LAST_ID, check);
        else this.walker.listed(sortedUnique(within), check);
        if (journal !== undefined) this.insertJournal(journal, now);
        return changed;
      })
      .immediate();
  }

  /** Every entry as an export shows it, in id order, `page` ids at a time; a damaged one is skipped (`damaged()`). */
  *entries(page = WALK_PAGE): Generator<ExportedEntry> {
    const range: ExportedEntry[] = [];
    const onDamaged = (): void => void this.damagedEntries++;
    for (let after = 0, last = this.walker.lastId(); after < last; after += page) {
      range.length = 0;
      this.walker.walk(after, after + page, (_, e) => void range.push(decodeExported(e)), page, onDamaged);
      yield* range;
    }
  }

  damaged(): number {
    return this.damagedEntries;
  }

  /** The entries by status, those without r, and for each bound those with r at most it: one walk of the table. */
  tally(bounds: readonly number[], page = WALK_PAGE): EntryTally {
    const byStatus: Record<EntryStatus, number> = { mapped: 0, optout: 0, invalid: 0 };
    const atMost = bounds.map(() => 0);
    let withoutR = 0;
    const onRecord = (_: number, e: EntryView): void => {
      byStatus[statusOfCode(e.status)]++;
      if (Number.isNaN(e.r)) withoutR++;
      else for (let i = 0; i < bounds.length; i++) if (e.r <= bounds[i]) atMost[i]++;
    };
    this.walk(0, LAST_ID, onRecord, page);
    return { byStatus, withoutR, atMost };
  }

  lastRun(): StateRun | null {
    return (prepared(this.db, SQL.lastRun).get() as StateRun | undefined) ?? null;
  }

  startRun(command: string, argsJson: string, nowS: number = Date.now() / 1000): number {
    this.writable('record a run');
    const startedAtS = Math.floor(Date.now() / 1000);
    const run = prepared(this.db, SQL.startRun).run(command, argsJson, process.pid, startedAtS, Math.floor(nowS));
    return Number(run.lastInsertRowid);
  }

  finishRun(id: number, summaryJson: string, exitCode: number, nowS: number = Date.now() / 1000): void {
    this.writable('record a run');
    prepared(this.db, SQL.finishRun).run(Math.floor(nowS), summaryJson, exitCode, id);
  }

  /** Takes the lock for a writing run; throws StateLockedError while another live run holds it. */
  lock(): void {
    try {
      this.lockFile.acquire();
      this.lockRefused = false;
    } catch (err) {
      // a connection refused the lock writes nothing more, not even at close: it may have reached the file through
      // another name (a hard link), and SQLite keeps a WAL per name, so its writes could undo the holder's
      if (err instanceof StateLockedError) this.lockRefused = true;
      throw err;
    }
  }

  /** lock(), waiting up to `waitMs` for another run to release it. */
  async waitForLock(waitMs: number): Promise<void> {
    const deadline = Date.now() + Math.max(0, waitMs);
    for (let pause = 50; ; pause = Math.min(pause * 2, 1_000)) {
      try {
        return this.lock();
      } catch (err) {
        if (!(err instanceof StateLockedError) || Date.now() >= deadline) throw err;
      }
      await new Promise((resolve) => setTimeout(resolve, Math.min(pause, Math.max(1, deadline - Date.now()))));
    }
  }

  get locked(): boolean {
    return this.lockFile.held;
  }

  /** Writes the WAL into the file and truncates it; StateBusyError while another process reads. */
  checkpoint(): void {
    this.writable('checkpoint');
    const [result] = this.db.pragma('wal_checkpoint(TRUNCATE)') as { busy: number }[];
    if (result !== undefined && result.busy !== 0) throw new StateBusyError(this.path);
  }

  vacuum(): void {
    this.writable('vacuum');
    this.db.exec('VACUUM');
    this.checkpoint();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    try {
      // the file alone then holds everything: a copy of it is a backup, and no big -wal stays beside it
      if (!this.readonly && !this.lockRefused) this.db.pragma('wal_checkpoint(TRUNCATE)');
    } catch {
      // another connection is reading: the WAL stays, and SQLite folds it in on a later open; nothing is lost
    }
    try {
      this.db.close();
    } finally {
      this.lockFile.release();
    }
  }

  private writable(what: string): void {
    if (this.readonly) throw new StateReadonlyError(this.path, what);
  }
}

/**
 * The window of the sorted sample ids that holds the most of them while its entries, widened at each end by the
 * mean gap between them, stay within NEIGHBOUR_READS_PER_KEY per request they stand for; null if none does.
 */
function denseSpan(sampleIds: Float64Array, asked: number): { from: number; to: number } | null {
  let best: { from: number; to: number } | null = null;
  let bestHits = 0;
  for (let i = 0; i < sampleIds.length; i++) {
    for (let j = i + NEIGHBOUR_MIN_HITS - 1; j < sampleIds.length; j++) {
      const hits = j - i + 1;
      const width = sampleIds[j] - sampleIds[i] + 1;
      const margin = Math.ceil(width / hits);
      const entries = width + 2 * margin;
      if (entries * NEIGHBOUR_SAMPLE > NEIGHBOUR_READS_PER_KEY * asked * hits) continue;
      if (hits > bestHits) {
        bestHits = hits;
        best = { from: Math.max(1, sampleIds[i] - margin), to: sampleIds[j] + margin };
      }
    }
  }
  return best;
}

function decodeExported(e: EntryView): ExportedEntry {
  const { type, hash, status, u, p, r } = e.record();
  return { type, hash, status, u, p, r };
}

/** Read field by field rather than picked from EntryView.record(): a sweep reads every entry with a raw UID. */
function decodeCandidate(id: number, e: EntryView): OptoutCandidate {
  return {
    id,
    u: e.text(e.uStart, e.uSize),
    p: e.text(e.pStart, e.pSize),
    lastOptoutCheckS: orNull(e.lastOptoutCheckS),
    type: TYPE_OF_CODE[e.type],
    hash: e.text(e.hashStart, e.hashSize) ?? '',
  };
}
