import type { Database, Statement, Transaction } from 'better-sqlite3';
import type { DiiType } from '../identity/index.js';
import { idList, sortedUnique } from './id-lists.js';
import { BatchWriter, type EncodedUpdate, encodeUpdates, TOMBSTONE, timeOrNull } from './batch-commit.js';
import { DueLists, decodeDue, orNull, pageLimit } from './due-lists.js';
import { KeyIndex } from './key-index.js';
import { keyOf } from './lookup-key.js';
import { StateBusyError, StateLockedError, StateReadonlyError, StateFormatError } from './errors.js';
import { StateLock } from './lock.js';
import { ChecksumError, checksumOf } from './checksum.js';
import { checkedMetaValue, metaSumOf } from './meta-values.js';
import { EntryView, type EntryValues, RecordWriter } from './entry-record.js';
import { LIST_PAGE, SQL } from './queries.js';
import { RecordWalker, WALK_PAGE, forEachJoined } from './record-walk.js';
import { IDENTITY_META_KEYS, META_KEYS, TYPE_CODE, TYPE_OF_CODE } from './schema.js';
import type {
  BucketEntries,
  ChangeJournalRows,
  CopiedEntry,
  DueCursor,
  DueDay,
  DueEntry,
  EntryUpdate,
  OptedOutRawUid,
  OptoutCandidate,
  OptoutCursor,
  PendingChange,
  RotatedBucket,
  StateMeta,
  StoredEntries,
} from './types.js';

// the sweep's default upper bound: past any id the table can hold
const LAST_ID = Number.MAX_SAFE_INTEGER;
const DEFAULT_TAIL_ENTRIES = 1_000_000;
// the key blocks the level readers keep in memory (types.ts, keyCacheMiB)
const DEFAULT_KEY_CACHE_MIB = 256;
// consecutive ids read as one range rather than in an IN (...) list, from this many on
const MIN_ID_RUN = 8;
// a lookup of at least NEIGHBOUR_MIN_KEYS keys first finds the ids of NEIGHBOUR_SAMPLE of them (readAnswersByKeys)
const NEIGHBOUR_MIN_KEYS = 256;
const NEIGHBOUR_SAMPLE = 16;
// the sample's ids that lie close together are read as a range when it holds at most this many entries per
// request the sample says it answers (a lookup in a key level costs several entries of a range)
const NEIGHBOUR_READS_PER_KEY = 4;
// and when at least this many of the sample lie in it
const NEIGHBOUR_MIN_HITS = 4;

/** Given each entry a joined read finds; gives back the request the entry answers, or -1. */
type OnAnswer = (entry: EntryView) => number;

/** Given each entry a read by id finds, with its id (the view is reused: nothing of it may be kept). */
type OnRecord = (id: number, entry: EntryView) => void;

/** The lookup key of each hash of one DII type. */
function lookupKeysOf(type: DiiType, hashes: readonly string[]): number[] {
  const code = TYPE_CODE[type];
  const lookupKeys = new Array<number>(hashes.length);
  for (let i = 0; i < hashes.length; i++) lookupKeys[i] = keyOf(code, hashes[i]);
  return lookupKeys;
}

/**
 * The requests of each lookup key, as chains: per key, the last request with it; per request, the one before it
 * with the same key (-1: none). A row found by key is matched by walking its key's chain.
 */
function requestsByKey(lookupKeys: readonly number[]): { lastWith: Map<number, number>; before: Int32Array } {
  const lastWith = new Map<number, number>();
  const before = new Int32Array(lookupKeys.length);
  for (let i = 0; i < lookupKeys.length; i++) {
    before[i] = lastWith.get(lookupKeys[i]) ?? -1;
    lastWith.set(lookupKeys[i], i);
  }
  return { lastWith, before };
}

/**
 * The state file over one better-sqlite3 connection, made by openState, which has checked the file. Every method
 * is synchronous and batch-oriented: each writing method is one transaction, so a crash leaves whole batches or
 * nothing.
 */
export class StateStore {
  private readonly stmts: ReturnType<typeof prepareAll>;
  private readonly walker: RecordWalker;
  /** Reused for every entry the joined reader gives out. */
  private readonly joinedEntry = new EntryView();
  /** Writes the batches of commitBatch (batch-commit.ts). */
  private readonly writer: BatchWriter;
  /** The per-day lists of what comes due (due-lists.ts). */
  private readonly due: DueLists;
  /** Which entries hold a lookup key: the key levels and the tail. */
  private readonly keys: KeyIndex;
  private readonly lockFile: StateLock;
  private lockRefused = false;
  private closed = false;

  /** Prepared on first use: a read-only open of a file from before the journal (schema 1) has no such table. */
  private journalStmts: ReturnType<typeof prepareJournal> | null = null;

  private readonly commitTx: Transaction<
    (updates: readonly EncodedUpdate[], nowS: number, journal: ChangeJournalRows | undefined) => void
  >;
  private readonly mergeTx: Transaction<() => void>;
  private readonly readTx: Transaction<(lookupKeys: readonly number[], onRecord: OnRecord) => void>;
  private readonly answersTx: Transaction<(lookupKeys: readonly number[], onAnswer: OnAnswer) => void>;

  constructor(
    private readonly db: Database,
    readonly path: string,
    readonly readonly: boolean,
    tailEntries = DEFAULT_TAIL_ENTRIES,
    keyCacheMiB = DEFAULT_KEY_CACHE_MIB,
  ) {
    this.stmts = prepareAll(db);
    this.walker = new RecordWalker(db);
    this.lockFile = new StateLock(path);
    this.due = new DueLists(db, this.walker, readonly);
    this.keys = new KeyIndex(db, this.walker, Math.max(1, Math.floor(tailEntries)), keyCacheMiB);
    this.writer = new BatchWriter(db, path, this.keys, this.due, (keys, hashOf, onMatch) =>
      this.matchRows(keys, hashOf, onMatch),
    );
    this.commitTx = db.transaction(
      (updates: readonly EncodedUpdate[], nowS: number, journal: ChangeJournalRows | undefined) => {
        this.writer.write(updates, nowS);
        if (journal !== undefined) this.insertJournal(journal, nowS);
      },
    );
    this.mergeTx = db.transaction(() => this.keys.merge());
    this.readTx = db.transaction((lookupKeys: readonly number[], onRecord: OnRecord) =>
      this.readRowsByKeys(lookupKeys, onRecord),
    );
    this.answersTx = db.transaction((lookupKeys: readonly number[], onAnswer: OnAnswer) =>
      this.readAnswersByKeys(lookupKeys, onAnswer),
    );
  }

  // ---- metadata

  meta(): StateMeta {
    const values = new Map<string, string>();
    for (const [key, value, sum] of this.stmts.metaAll.raw().all() as [string, string, number][])
      values.set(key, checkedMetaValue(key, [value, sum]) ?? '');
    const api = values.get(META_KEYS.api);
    return {
      schemaVersion: Number(values.get(META_KEYS.schemaVersion)),
      envFingerprint: values.get(META_KEYS.envFingerprint) ?? '',
      api: api === 'v2' ? 'v2' : 'v3',
      createdAt: values.get(META_KEYS.createdAt) ?? '',
    };
  }

  getMeta(key: string): string | null {
    return checkedMetaValue(key, this.stmts.metaGet.raw().get(key)) ?? null;
  }

  /** Sets a metadata value (e.g. `last_buckets_check`, `api` after a migration). Identity keys are refused. */
  setMeta(key: string, value: string): void {
    this.writable(`set ${key}`);
    if (IDENTITY_META_KEYS.has(key)) {
      throw new StateFormatError(
        `state file ${this.path}: '${key}' says what the file is and cannot be changed`,
        this.path,
      );
    }
    if (key === META_KEYS.api && value !== 'v2' && value !== 'v3') {
      throw new StateFormatError(`state file ${this.path}: api must be v2 or v3, not '${value}'`, this.path);
    }
    this.putMeta(key, value);
  }

  /** A meta value with its checksum, inside the caller's transaction if any. */
  private putMeta(key: string, value: string): void {
    this.stmts.metaSet.run(key, value, metaSumOf(key, value));
  }

  // ---- lookups

  lookupStored(type: DiiType, hashes: readonly string[]): StoredEntries {
    const at: number[] = [];
    const status: number[] = [];
    const due: number[] = [];
    const r: number[] = [];
    const u: (string | null)[] = [];
    const p: (string | null)[] = [];
    const bucketId: (string | null)[] = [];
    if (hashes.length > 0) {
      this.keys.catchUp();
      const lookupKeys = lookupKeysOf(type, hashes);
      const { lastWith, before } = requestsByKey(lookupKeys);
      const onAnswer = (e: EntryView): number => {
        const key = e.key();
        for (let i = lastWith.get(key) ?? -1; i >= 0; i = before[i]) {
          if (!e.holdsHash(hashes[i])) continue;
          at.push(i);
          status.push(e.status);
          due.push(e.due === 1 ? 1 : 0);
          r.push(e.r);
          u.push(e.text(e.uStart, e.uSize));
          p.push(e.text(e.pStart, e.pSize));
          bucketId.push(e.text(e.bucketStart, e.bucketSize));
          return i;
        }
        return -1;
      };
      if (this.db.inTransaction) this.readAnswersByKeys(lookupKeys, onAnswer);
      else this.answersTx(lookupKeys, onAnswer);
    }
    return {
      at: Int32Array.from(at),
      status: Uint8Array.from(status),
      due: Uint8Array.from(due),
      r: Float64Array.from(r),
      u,
      p,
      bucketId,
    };
  }

  /**
   * Gives each entry of the asked keys to the first request it answers: the one with the entry's lookup key (the
   * key holds the DII type) and its hash. Requests are found by key, a number, so that no entry's hash is hashed
   * into a map; the answer keeps the caller's strings.
   */
  private matchRows(
    lookupKeys: readonly number[],
    hashOf: (request: number) => string,
    onMatch: (request: number, id: number, e: EntryView) => void,
  ): void {
    const { lastWith, before } = requestsByKey(lookupKeys);
    this.rowsByKeys(lookupKeys, (id, e) => {
      for (let i = lastWith.get(e.key()) ?? -1; i >= 0; i = before[i]) {
        if (e.holdsHash(hashOf(i))) {
          onMatch(i, id, e);
          return;
        }
      }
    });
  }

  /**
   * The rows of every entry whose lookup key is one of these (a key may match other hashes too: the caller
   * compares), each once. In one read transaction (or the caller's), so that the key tables are seen together
   * even while another connection merges.
   */
  private rowsByKeys(lookupKeys: readonly number[], onRecord: OnRecord): void {
    if (this.db.inTransaction) this.readRowsByKeys(lookupKeys, onRecord);
    else this.readTx(lookupKeys, onRecord);
  }

  /**
   * First the ids: merged entries' from each key level, for the keys its filter lets through (its
   * LevelReader, level-reader.ts, reads the blocks that may hold them); the tail's from its in-memory index. Then the
   * entries, by id in ascending order, so that they are read in table order.
   *
   * A key is looked for in the main level when either filter may hold it: another connection may have folded
   * entries of the recent level into the main one since the filters were read, and those are in the recent
   * filter. Entries it merged into the recent level since are this connection's tail, found there.
   */
  private readRowsByKeys(lookupKeys: readonly number[], onRecord: OnRecord): void {
    const ids = this.keys.idsOf(lookupKeys);
    if (ids.length > 0) this.walker.listed(sortedUnique(ids), onRecord);
  }

  /**
   * readRowsByKeys for a map run's answers, read joined: each statement gives one row, the records of its
   * entries in one blob, instead of a row per entry (which is most of what a lookup costs). Runs of consecutive
   * ids (entries looked up in the order they were stored) are read as id ranges, the other ids in IN (...) lists.
   *
   * A file mapped again asks for the entries of one committed batch at a time, whose ids are close together,
   * while their keys are spread over the whole main level: a lookup in it per key costs several times what
   * reading an entry of a range does. So the ids of a sample of the keys come first; where many of them lie
   * close together, the entries of that id range (widened by the gap the sample leaves at each end) are read
   * whole and matched to the requests by key and hash, and only the requests left unanswered go through the keys
   * tables. Ids in the range read are not given again.
   */
  private readAnswersByKeys(lookupKeys: readonly number[], onAnswer: OnAnswer): void {
    let asked = lookupKeys;
    let ids: number[] = [];
    let read: IdSpan | null = null;
    const n = lookupKeys.length;
    if (n >= NEIGHBOUR_MIN_KEYS) {
      const sampled = new Uint8Array(n);
      const sampleKeys: number[] = [];
      for (let k = 0; k < NEIGHBOUR_SAMPLE; k++) {
        const i = Math.floor(((k + 0.5) * n) / NEIGHBOUR_SAMPLE);
        sampled[i] = 1;
        sampleKeys.push(lookupKeys[i]);
      }
      const sampleIds = this.keys.idsOf(sampleKeys);
      read = denseSpan(sortedUnique(sampleIds), n);
      const left: number[] = [];
      if (read !== null) {
        const answered = new Uint8Array(n);
        const onRead = (e: EntryView): number => {
          const i = onAnswer(e);
          if (i >= 0) answered[i] = 1;
          return i;
        };
        for (let from = read.from; from <= read.to; from += LIST_PAGE) {
          const to = Math.min(read.to, from + LIST_PAGE - 1);
          this.readJoinedAnswers(this.stmts.joinedRecordsInRange, [from, to], idRange(from, to), onRead);
        }
        for (let i = 0; i < n; i++) if (answered[i] === 0) left.push(lookupKeys[i]);
      } else {
        // the sample's ids are found already: they join the others
        ids = sampleIds;
        for (let i = 0; i < n; i++) if (sampled[i] === 0) left.push(lookupKeys[i]);
      }
      asked = left;
    }
    for (const id of this.keys.idsOf(asked)) ids.push(id);
    if (read !== null) {
      const { from, to } = read;
      ids = ids.filter((id) => id < from || id > to);
    }
    if (ids.length === 0) return;
    const sorted = sortedUnique(ids);
    const scattered: number[] = [];
    for (let i = 0; i < sorted.length; ) {
      let end = i + 1;
      while (end < sorted.length && end - i < LIST_PAGE && sorted[end] === sorted[end - 1] + 1) end++;
      if (end - i >= MIN_ID_RUN) {
        this.readJoinedAnswers(
          this.stmts.joinedRecordsInRange,
          [sorted[i], sorted[end - 1]],
          sorted.slice(i, end),
          onAnswer,
        );
      } else for (let j = i; j < end; j++) scattered.push(sorted[j]);
      i = end;
    }
    for (let start = 0; start < scattered.length; start += LIST_PAGE) {
      const page = scattered.slice(start, start + LIST_PAGE);
      this.readJoinedAnswers(this.stmts.listedRecords, [idList(page)], page, onAnswer);
    }
  }

  /**
   * One joined statement's entries, each given to `onAnswer` in turn. Records that do not add up to the blob (a
   * record cut short, or bytes left over) are read again row by row: `ids` are the ids the statement covers.
   */
  private readJoinedAnswers(
    stmt: Statement,
    params: readonly (number | string)[],
    ids: ArrayLike<number>,
    onAnswer: OnAnswer,
  ): void {
    const [count, bytes] = stmt.get(params) as [number, Buffer | null];
    if (count === 0) return;
    const answer = (_: number, e: EntryView): boolean => {
      onAnswer(e);
      return true;
    };
    if (!forEachJoined(bytes, count, this.joinedEntry, answer)) this.walker.listed(ids, answer);
  }

  /** Forgets the tail and what was read of the file (on open, and after a failed transaction). */
  private resetTail(): void {
    this.keys.reset();
    this.due.forget();
  }

  // ---- writes from map and remap

  commitBatch(updates: readonly (EntryUpdate | CopiedEntry)[], nowS: number, journal?: ChangeJournalRows): void {
    this.writable('commit a batch');
    if (updates.length === 0 && journal === undefined) return;
    const encoded = encodeUpdates(updates);
    try {
      this.commitTx.immediate(encoded, Math.floor(nowS), journal);
    } catch (err) {
      // the rows it appended were rolled back: so must their tail entries be
      this.resetTail();
      throw err;
    }
    if (this.keys.full) this.mergeTailNow();
  }

  /**
   * Opens a transaction that the following commitBatch calls join (each still whole or nothing inside it) until
   * endGroup commits them together or abortGroup rolls them all back. Nothing of a group is in the file before
   * endGroup returns: a caller reports its batches committed only then. Lookups inside a group see its batches.
   */
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
    // SQLite may have rolled back already (a full disk does): then there is nothing left to roll back
    if (this.db.inTransaction) this.db.exec('ROLLBACK');
    // the rows the group appended are gone: so must their tail entries be
    this.resetTail();
  }

  /** Merges the tail now (a writing store does it by itself once the tail is `tailEntries` long). */
  private mergeTailNow(): void {
    try {
      this.mergeTx.immediate();
      this.keys.merged();
    } catch (err) {
      this.resetTail();
      throw err;
    }
  }

  // ---- pending changes: rows of committed batches that no committed output holds yet

  /** Pending change rows of one channel in id order after `afterId` (default 0), at most `limit` (default 5,000). */
  pendingChanges(channel: string, afterId = 0, limit = 5_000): PendingChange[] {
    const n = pageLimit(limit);
    if (n === 0) return [];
    const rows = this.journal().select.all(channel, afterId, n) as [number, string, number][];
    return rows.map(([id, row, sum]) => {
      if (sum !== checksumOf(row)) throw new ChecksumError('a pending change row');
      return { id, row };
    });
  }

  /** Pending change rows per channel (each kind, and each share of a kind that sharded runs journaled). */
  readonly pendingChangeCounts = (): Record<string, number> => pendingChangeCounts(this.db);

  /** The id of the last pending change row of one channel; null when none is pending. */
  lastPendingChangeId(channel: string): number | null {
    return (this.journal().last.get(channel) as number | null | undefined) ?? null;
  }

  /** Deletes the pending change rows of one channel up to and including `upToId`, once an output holding them is committed. */
  ackChanges(channel: string, upToId: number): number {
    this.writable('acknowledge delivered changes');
    return this.journal().ack.run(channel, upToId).changes;
  }

  private journal(): ReturnType<typeof prepareJournal> {
    this.journalStmts ??= prepareJournal(this.db);
    return this.journalStmts;
  }

  /** Inside the caller's transaction. */
  private insertJournal(journal: ChangeJournalRows, nowS: number): void {
    const insert = this.journal().insert;
    for (const row of journal.rows) insert.run(journal.runId, journal.channel, row, checksumOf(row), nowS);
  }

  // ---- v3: due by refresh time (due-lists.ts)

  /** v3 entries with r <= nowS. */
  countDue(nowS: number): number {
    return this.due.count(nowS);
  }

  /** Entries coming due per day for `days` days: day 0 is today (r <= now), day i is (now + (i-1)d, now + i d]. */
  dueByDay(nowS: number, days: number): DueDay[] {
    return this.due.byDay(nowS, days);
  }

  /** v3 entries with r <= nowS in (r, id) order after `after`, at most `limit`. */
  selectDue(nowS: number, after: DueCursor | null, limit: number): DueEntry[] {
    return this.due.select(nowS, after, limit);
  }

  // ---- v2: due by salt bucket rotation

  /** v2 entries marked due, in id order after `after`, at most `limit`. */
  selectDueV2(after: number | null, limit: number): DueEntry[] {
    const n = pageLimit(limit);
    if (n === 0) return [];
    const out: DueEntry[] = [];
    this.walk(after ?? 0, LAST_ID, (id, e) => {
      if (e.due === 1) out.push(decodeDue(id, e));
      return out.length < n;
    });
    return out;
  }

  countDueV2(): number {
    return this.count((e) => e.due === 1);
  }

  /** How many entries `which` picks, in one walk of the table. */
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
    // per bucket, its latest rotation: an entry mapped before it is due
    const rotated = new Map<string, number>();
    for (const b of buckets) rotated.set(b.bucketId, Math.max(rotated.get(b.bucketId) ?? -Infinity, b.lastUpdatedMs));
    // last_mapped is in seconds and last_updated in ms: an entry mapped in the rotation's second counts as before it
    const due = (e: EntryView): boolean => {
      const since = e.bucketSize < 0 ? undefined : rotated.get(e.text(e.bucketStart, e.bucketSize) ?? '');
      return since !== undefined && (Number.isNaN(e.lastMappedS) || e.lastMappedS * 1000 < since);
    };
    return this.db.transaction(() => this.markDue(due)).immediate();
  }

  /**
   * Marks due every mapped v2 entry (one with a salt bucket); v3 entries are left alone, so a migration can start every run with it: what an earlier run already moved to v3 is not sent again.
   */
  markBucketEntriesDue(): number {
    this.writable('mark entries due');
    return this.db.transaction(() => this.markDue((e) => e.bucketSize >= 0)).immediate();
  }

  /** Marks due every mapped entry not due yet that `which` picks, in one walk of the table; gives how many. */
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
  bucketEntries(): BucketEntries {
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
  entryValues(after: number, limit: number): { id: number; values: EntryValues }[] {
    const out: { id: number; values: EntryValues }[] = [];
    const n = pageLimit(limit);
    if (n === 0) return out;
    this.walk(
      after,
      LAST_ID,
      (id, e) => out.push({ id, values: e.values() }) < n,
      Math.min(WALK_PAGE, Math.max(16, n)),
    );
    return out;
  }

  /** An entry's record written again with some values changed (inside the caller's transaction). */
  private rewrite(writer: RecordWriter, id: number, e: EntryView, change: Partial<EntryValues>): void {
    this.stmts.updateRecord.run(writer.write({ ...e.values(), ...change }), id);
  }

  /** A walk of the table in a read transaction (or the caller's), so that its pages see one state of the file. */
  private walk(after: number, upTo: number, onRecord: (id: number, e: EntryView) => unknown, page?: number): void {
    const walk = (): void => this.walker.walk(after, upTo, onRecord, page);
    if (this.db.inTransaction) walk();
    else this.db.transaction(walk)();
  }

  // ---- opt-out sweep

  /**
   * Entries with a raw UID (u or p) in id order: after `after` (null: from the first entry) and up to `upTo`
   * (default: the end of the table). A sweep starts after sweepCursor() and wraps to the first entry itself.
   */
  selectForOptoutCheck(limit: number, after: OptoutCursor | null, upTo: number = LAST_ID): OptoutCandidate[] {
    const n = pageLimit(limit);
    if (n === 0) return [];
    const out: OptoutCandidate[] = [];
    // the entries that hold a raw UID, in id order; a page of the table may hold fewer
    this.walk(
      after?.id ?? 0,
      upTo,
      (id, e) => {
        if (e.uSize >= 0 || e.pSize >= 0) out.push(decodeCandidate(id, e));
        return out.length < n;
      },
      Math.min(WALK_PAGE, Math.max(16, n)),
    );
    return out;
  }

  /** Where the next sweep starts: after the last entry whose check a sweep committed (id 0 when none). */
  sweepCursor(): OptoutCursor {
    const id = Number(this.getMeta(META_KEYS.sweepAfter) ?? 0);
    return { id: Number.isSafeInteger(id) && id > 0 ? id : 0 };
  }

  countWithRawUid(): number {
    return this.count((e) => e.uSize >= 0 || e.pSize >= 0);
  }

  /** ceil(fraction * countWithRawUid()). */
  sweepSize(fraction: number): number {
    if (!(fraction > 0)) return 0;
    const total = this.countWithRawUid();
    return Math.min(total, Math.ceil(Math.min(fraction, 1) * total));
  }

  /** Records the check time of these entries; with `cursor`, moves sweepCursor() there in the same transaction. */
  recordOptoutChecks(ids: readonly number[], nowS: number, cursor?: OptoutCursor): void {
    this.writable('record opt-out checks');
    if (ids.length === 0 && cursor === undefined) return;
    const now = Math.floor(nowS);
    this.db
      .transaction(() => {
        const writer = new RecordWriter();
        this.walker.listed(sortedUnique(ids), (id, e) => this.rewrite(writer, id, e, { lastOptoutCheckS: now }));
        if (cursor !== undefined) this.putMeta(META_KEYS.sweepAfter, String(cursor.id));
      })
      .immediate();
  }

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
  ): number {
    this.writable('tombstone opted-out entries');
    if (optedOut.length === 0) return 0;
    const now = Math.floor(nowS);
    // per opted-out raw UID, when it opted out (the last one given for a raw UID listed twice)
    const since = new Map<string, number>();
    for (const o of optedOut) since.set(o.rawUid, o.optedOutSinceMs);
    const writer = new RecordWriter();
    let changed = 0;
    // an entry holding one keeps its hash, last mapped time and opted-out time, with the check's time; it loses
    // every raw UID
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
        // the ids whose raw UIDs were sent, or without them one walk of the table
        if (within === undefined) this.walker.walk(0, LAST_ID, check);
        else this.walker.listed(sortedUnique(within), check);
        if (journal !== undefined) this.insertJournal(journal, now);
        return changed;
      })
      .immediate();
  }

  // ---- runs

  startRun(command: string, argsJson: string, nowS: number = Date.now() / 1000): number {
    this.writable('record a run');
    const startedAtS = Math.floor(Date.now() / 1000);
    return Number(
      this.stmts.startRun.run(command, argsJson, process.pid, startedAtS, Math.floor(nowS)).lastInsertRowid,
    );
  }

  finishRun(id: number, summaryJson: string, exitCode: number, nowS: number = Date.now() / 1000): void {
    this.writable('record a run');
    this.stmts.finishRun.run(Math.floor(nowS), summaryJson, exitCode, id);
  }

  // ---- lock and life cycle

  /** Takes the lock for a writing run; throws StateLockedError while another live run holds it. */
  lock(): void {
    try {
      this.lockFile.acquire();
    } catch (err) {
      this.refusedLock(err);
      throw err;
    }
  }

  /**
   * Takes the lock, waiting up to `waitMs` for another live run to release it (polling with growing pauses);
   * rejects with the same StateLockedError as lock() when the time is up.
   */
  async waitForLock(waitMs: number): Promise<void> {
    const deadline = Date.now() + Math.max(0, waitMs);
    let pause = 50;
    for (;;) {
      try {
        this.lockFile.acquire();
        return;
      } catch (err) {
        if (!(err instanceof StateLockedError) || Date.now() >= deadline) {
          this.refusedLock(err);
          throw err;
        }
      }
      await new Promise((resolve) => setTimeout(resolve, Math.min(pause, Math.max(1, deadline - Date.now()))));
      pause = Math.min(pause * 2, 1_000);
    }
  }

  get locked(): boolean {
    return this.lockFile.held;
  }

  /**
   * A connection refused the lock writes nothing more, not even at close: it may have reached the file through
   * another name (a hard link), and SQLite keeps a WAL per name, so its writes could undo the holder's.
   */
  private refusedLock(err: unknown): void {
    if (err instanceof StateLockedError) this.lockRefused = true;
  }

  /**
   * Writes the write-ahead log into the file and truncates it, so that the file alone is a full copy; throws
   * StateBusyError when another process reads the file meanwhile.
   */
  checkpoint(): void {
    this.writable('checkpoint');
    const [result] = this.db.pragma('wal_checkpoint(TRUNCATE)') as { busy: number }[];
    if (result !== undefined && result.busy !== 0) throw new StateBusyError(this.path);
  }

  /** Rebuilds the file without its free pages, then checkpoints. */
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

function prepareAll(db: Database) {
  const raw = (sql: string): Statement => db.prepare(sql).raw();
  const plain = (sql: string): Statement => db.prepare(sql);
  return {
    updateRecord: plain(SQL.updateRecord),
    joinedRecordsInRange: raw(SQL.joinedRecordsInRange),
    listedRecords: raw(SQL.listedRecords),
    metaAll: plain(SQL.metaAll),
    metaGet: plain(SQL.metaGet),
    metaSet: plain(SQL.metaSet),
    startRun: plain(SQL.startRun),
    finishRun: plain(SQL.finishRun),
  };
}

export const pendingChangeCounts = (db: Database): Record<string, number> =>
  Object.fromEntries(db.prepare(SQL.pendingChangeCounts).raw().all() as [string, number][]);

function prepareJournal(db: Database) {
  return {
    insert: db.prepare(SQL.insertPendingChange),
    select: db.prepare(SQL.pendingChanges).raw(),
    last: db.prepare(SQL.lastPendingChange).pluck(),
    ack: db.prepare(SQL.ackChanges),
  };
}

/** An id range, both ends included. */
interface IdSpan {
  from: number;
  to: number;
}

/**
 * The id range worth reading whole for a lookup of `asked` keys, from the sorted ids of its sample of
 * NEIGHBOUR_SAMPLE keys: the window of sample ids that holds the most of them while its entries, widened at each
 * end by the mean gap between them, stay within NEIGHBOUR_READS_PER_KEY per request they stand for; null if no
 * window of NEIGHBOUR_MIN_HITS ids does.
 */
function denseSpan(sampleIds: Float64Array, asked: number): IdSpan | null {
  let best: IdSpan | null = null;
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

/** The ids from `from` to `to`, both included. */
function idRange(from: number, to: number): number[] {
  const ids = new Array<number>(to - from + 1);
  for (let i = 0; i < ids.length; i++) ids[i] = from + i;
  return ids;
}

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
