import type { Database, Statement, Transaction } from 'better-sqlite3';
import type { DiiType } from '../identity/index.js';
import { StateReadonlyError, StateFormatError } from './errors.js';
import { StateLock } from './lock.js';
import { IN_LIST_SIZES, SQL } from './queries.js';
import { IDENTITY_META_KEYS, META_KEYS, TYPE_CODE, TYPE_OF_CODE, statusOfCode } from './schema.js';
import type {
  BucketEntries,
  ChangeJournalRows,
  ChangeKind,
  DueCursor,
  DueDay,
  DueEntry,
  EntryUpdate,
  OptedOutRawUid,
  OptoutCandidate,
  OptoutCursor,
  PendingChange,
  RotatedBucket,
  RunRecord,
  StateCounts,
  StateEntry,
  StateMeta,
  StateStore,
} from './types.js';

type Row = unknown[];

const DAY_S = 86_400;
const MAX_IN_LIST = IN_LIST_SIZES[IN_LIST_SIZES.length - 1];
// the checked range of the sweep starts below any real check time
const BEFORE_ANY_CHECK = Number.MIN_SAFE_INTEGER;

/** The StateStore over one better-sqlite3 connection; made by openState, which has checked the file. */
export class SqliteStateStore implements StateStore {
  private readonly stmts: ReturnType<typeof prepareAll>;
  private readonly lookupStmts = new Map<number, Statement>();
  private readonly idStmts = new Map<number, Statement>();
  private readonly lockFile: StateLock;
  private closed = false;

  /** Prepared on first use: a read-only open of a file from before the journal (schema 1) has no such table. */
  private journalStmts: ReturnType<typeof prepareJournal> | null = null;

  private readonly commitTx: Transaction<(updates: readonly EntryUpdate[], nowS: number, journal: ChangeJournalRows | undefined) => void>;
  private readonly recordChecksTx: Transaction<(ids: readonly number[], nowS: number) => void>;
  private readonly markBucketsTx: Transaction<(buckets: readonly RotatedBucket[]) => number>;

  constructor(
    private readonly db: Database,
    readonly path: string,
    readonly readonly: boolean,
  ) {
    this.stmts = prepareAll(db);
    this.lockFile = new StateLock(path);
    const s = this.stmts;
    this.commitTx = db.transaction((updates: readonly EntryUpdate[], nowS: number, journal: ChangeJournalRows | undefined) => {
      for (const { type, hash, outcome } of updates) {
        const t = TYPE_CODE[type];
        switch (outcome.kind) {
          case 'mapped':
            s.upsertMapped.run(t, hash, outcome.u, outcome.p, outcome.r, outcome.bucketId ?? null, nowS, nowS);
            break;
          case 'optout':
            s.upsertOptout.run(t, hash, outcome.optedOutSinceMs ?? null);
            break;
          case 'invalid':
            s.upsertInvalid.run(t, hash);
            break;
        }
      }
      if (journal !== undefined) this.insertJournal(journal, nowS);
    });
    this.recordChecksTx = db.transaction((ids: readonly number[], nowS: number) => {
      for (const id of ids) s.recordOptoutCheck.run(nowS, id);
    });
    this.markBucketsTx = db.transaction((buckets: readonly RotatedBucket[]) => {
      let marked = 0;
      for (const b of buckets) marked += s.markBucketRotated.run(b.bucketId, b.lastUpdatedMs).changes;
      return marked;
    });
  }

  // ---- metadata

  meta(): StateMeta {
    const values = new Map<string, string>();
    for (const [key, value] of this.stmts.metaAll.raw().all() as [string, string][]) values.set(key, value);
    const api = values.get(META_KEYS.api);
    return {
      schemaVersion: Number(values.get(META_KEYS.schemaVersion)),
      envFingerprint: values.get(META_KEYS.envFingerprint) ?? '',
      api: api === 'v2' ? 'v2' : 'v3',
      createdAt: values.get(META_KEYS.createdAt) ?? '',
    };
  }

  getMeta(key: string): string | null {
    const value = this.stmts.metaGet.pluck().get(key) as string | undefined;
    return value ?? null;
  }

  setMeta(key: string, value: string): void {
    this.writable(`set ${key}`);
    if (IDENTITY_META_KEYS.has(key)) {
      throw new StateFormatError(`state file ${this.path}: '${key}' says what the file is and cannot be changed`, this.path);
    }
    if (key === META_KEYS.api && value !== 'v2' && value !== 'v3') {
      throw new StateFormatError(`state file ${this.path}: api must be v2 or v3, not '${value}'`, this.path);
    }
    this.stmts.metaSet.run(key, value);
  }

  // ---- lookups

  lookupMany(keys: readonly { type: DiiType; hash: string }[]): Map<string, StateEntry> {
    const found = new Map<string, StateEntry>();
    if (keys.length === 0) return found;
    // which DII types were asked for each hash, as bits: no key string is built for a hash that is not stored
    const wanted = new Map<string, number>();
    const hashes = new Array<string>(keys.length);
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i];
      hashes[i] = k.hash;
      wanted.set(k.hash, (wanted.get(k.hash) ?? 0) | (1 << TYPE_CODE[k.type]));
    }
    this.rowsByHashes(hashes, (row) => {
      const type = row[1] as number;
      const hash = row[2] as string;
      if (((wanted.get(hash) ?? 0) & (1 << type)) !== 0) found.set(`${TYPE_OF_CODE[type]}:${hash}`, decodeEntry(row));
    });
    return found;
  }

  lookupHashes(type: DiiType, hashes: readonly string[]): Map<string, StateEntry> {
    const found = new Map<string, StateEntry>();
    if (hashes.length === 0) return found;
    const code = TYPE_CODE[type];
    this.rowsByHashes(hashes, (row) => {
      if (row[1] === code) found.set(row[2] as string, decodeEntry(row));
    });
    return found;
  }

  /**
   * One indexed probe per hash through IN (...) lists of a few fixed sizes: SQLite sorts the list and walks the
   * index in order, measured faster than one statement per key or a JSON table. Padding repeats a hash (an IN
   * list is a set), so a handful of prepared statements serve every length.
   */
  private rowsByHashes(hashes: readonly string[], onRow: (row: Row) => void): void {
    for (let start = 0; start < hashes.length; start += MAX_IN_LIST) {
      const end = Math.min(hashes.length, start + MAX_IN_LIST);
      const size = inListSize(end - start);
      const params = new Array<string>(size);
      for (let i = start; i < end; i++) params[i - start] = hashes[i];
      params.fill(hashes[end - 1], end - start);
      for (const row of this.inListStatement(this.lookupStmts, size, SQL.lookupByHashes).all(params) as Row[]) onRow(row);
    }
  }

  private inListStatement(cache: Map<number, Statement>, size: number, sql: (n: number) => string): Statement {
    let stmt = cache.get(size);
    if (stmt === undefined) {
      stmt = this.db.prepare(sql(size)).raw();
      cache.set(size, stmt);
    }
    return stmt;
  }

  // ---- writes from map and remap

  commitBatch(updates: readonly EntryUpdate[], nowS: number, journal?: ChangeJournalRows): void {
    this.writable('commit a batch');
    if (updates.length === 0) return;
    this.commitTx.immediate(updates, Math.floor(nowS), journal);
  }

  // ---- pending changes: rows of committed batches that no committed output holds yet

  pendingChanges(kind: ChangeKind, afterId = 0, limit = 5_000): PendingChange[] {
    const n = pageLimit(limit);
    if (n === 0) return [];
    const rows = this.journal().select.all(kind, afterId, n) as [number, string][];
    return rows.map(([id, row]) => ({ id, row }));
  }

  lastPendingChangeId(kind: ChangeKind): number | null {
    return (this.journal().last.get(kind) as number | null | undefined) ?? null;
  }

  ackChanges(kind: ChangeKind, upToId: number): number {
    this.writable('acknowledge delivered changes');
    return this.journal().ack.run(kind, upToId).changes;
  }

  private journal(): ReturnType<typeof prepareJournal> {
    this.journalStmts ??= prepareJournal(this.db);
    return this.journalStmts;
  }

  /** Inside the caller's transaction. */
  private insertJournal(journal: ChangeJournalRows, nowS: number): void {
    const insert = this.journal().insert;
    for (const row of journal.rows) insert.run(journal.runId, journal.kind, row, nowS);
  }

  // ---- v3: due by refresh time

  countDue(nowS: number): number {
    return this.stmts.countDue.pluck().get(Math.floor(nowS)) as number;
  }

  dueByDay(nowS: number, days: number): DueDay[] {
    const now = Math.floor(nowS);
    const n = Math.max(0, Math.floor(days));
    if (n === 0) return [];
    const counts = new Array<number>(n).fill(0);
    counts[0] = this.countDue(now);
    if (n > 1) {
      for (const [day, count] of this.stmts.dueByDay.raw().all(now, now, now + (n - 1) * DAY_S) as [number, number][]) {
        counts[day] += count;
      }
    }
    return counts.map((count, i) => ({ day: utcDay(now + i * DAY_S), count }));
  }

  selectDue(nowS: number, after: DueCursor | null, limit: number): DueEntry[] {
    const now = Math.floor(nowS);
    const n = pageLimit(limit);
    if (n === 0) return [];
    if (after === null || after.r === null) return (this.stmts.selectDueFirst.all(now, n) as Row[]).map(decodeDue);
    const out: DueEntry[] = [];
    if (after.r <= now) for (const row of this.stmts.selectDueSameR.all(after.r, after.id, n) as Row[]) out.push(decodeDue(row));
    if (out.length < n) {
      for (const row of this.stmts.selectDueLaterR.all(after.r, now, n - out.length) as Row[]) out.push(decodeDue(row));
    }
    return out;
  }

  // ---- v2: due by salt bucket rotation

  selectDueV2(after: number | null, limit: number): DueEntry[] {
    const n = pageLimit(limit);
    if (n === 0) return [];
    return (this.stmts.selectDueV2.all(after ?? 0, n) as Row[]).map(decodeDue);
  }

  countDueV2(): number {
    return this.stmts.countDueV2.pluck().get() as number;
  }

  markBucketsRotated(buckets: readonly RotatedBucket[]): number {
    this.writable('mark rotated buckets');
    if (buckets.length === 0) return 0;
    return this.markBucketsTx.immediate(buckets);
  }

  markAllMappedDue(): number {
    this.writable('mark entries due');
    return this.stmts.markAllMappedDue.run().changes;
  }

  markBucketEntriesDue(): number {
    this.writable('mark entries due');
    return this.stmts.markBucketEntriesDue.run().changes;
  }

  bucketEntries(): BucketEntries {
    const [count, oldest] = this.stmts.bucketEntries.raw().get() as [number, number | null];
    return { count, oldestMappedS: oldest };
  }

  // ---- opt-out sweep

  selectForOptoutCheck(limit: number, after: OptoutCursor | null): OptoutCandidate[] {
    const n = pageLimit(limit);
    if (n === 0) return [];
    const out: OptoutCandidate[] = [];
    let laterThan: number;
    if (after === null || after.lastOptoutCheckS === null) {
      for (const row of this.stmts.sweepNeverChecked.all(after?.id ?? 0, n) as Row[]) out.push(decodeCandidate(row));
      laterThan = BEFORE_ANY_CHECK;
    } else {
      for (const row of this.stmts.sweepSameCheck.all(after.lastOptoutCheckS, after.id, n) as Row[]) out.push(decodeCandidate(row));
      laterThan = after.lastOptoutCheckS;
    }
    if (out.length < n) {
      for (const row of this.stmts.sweepLaterCheck.all(laterThan, n - out.length) as Row[]) out.push(decodeCandidate(row));
    }
    return out;
  }

  countWithRawUid(): number {
    return this.stmts.countWithRawUid.pluck().get() as number;
  }

  sweepSize(fraction: number): number {
    if (!(fraction > 0)) return 0;
    const total = this.countWithRawUid();
    return Math.min(total, Math.ceil(Math.min(fraction, 1) * total));
  }

  recordOptoutChecks(ids: readonly number[], nowS: number): void {
    this.writable('record opt-out checks');
    if (ids.length === 0) return;
    this.recordChecksTx.immediate(ids, Math.floor(nowS));
  }

  tombstoneByRawUid(optedOut: readonly OptedOutRawUid[], nowS: number, within?: readonly number[], journal?: ChangeJournalRows): number {
    this.writable('tombstone opted-out entries');
    if (optedOut.length === 0) return 0;
    const now = Math.floor(nowS);
    const tx = (): number => {
      const changed = within === undefined ? this.tombstoneByScan(optedOut, now) : this.tombstoneWithin(optedOut, now, within);
      if (journal !== undefined) this.insertJournal(journal, now);
      return changed;
    };
    return this.db.transaction(tx).immediate();
  }

  /** Reads u and p of the given rows by id, then tombstones those holding an opted-out raw UID. */
  private tombstoneWithin(optedOut: readonly OptedOutRawUid[], nowS: number, within: readonly number[]): number {
    const since = new Map<string, number>();
    for (const o of optedOut) since.set(o.rawUid, o.optedOutSinceMs);
    let changed = 0;
    for (let start = 0; start < within.length; start += MAX_IN_LIST) {
      const end = Math.min(within.length, start + MAX_IN_LIST);
      const size = inListSize(end - start);
      const params = new Array<number>(size);
      for (let i = start; i < end; i++) params[i - start] = within[i];
      params.fill(within[end - 1], end - start);
      const rows = this.inListStatement(this.idStmts, size, SQL.rawUidsByIds).all(params) as [number, string | null, string | null][];
      for (const [id, u, p] of rows) {
        const sinceMs = (u !== null ? since.get(u) : undefined) ?? (p !== null ? since.get(p) : undefined);
        if (sinceMs !== undefined) changed += this.stmts.tombstoneById.run(sinceMs, nowS, id).changes;
      }
    }
    return changed;
  }

  /** Without ids to read, one pass over the table against a temporary table of the raw UIDs. */
  private tombstoneByScan(optedOut: readonly OptedOutRawUid[], nowS: number): number {
    this.db.prepare(SQL.createOptoutProbe).run();
    this.db.prepare(SQL.clearOptoutProbe).run();
    const fill = this.db.prepare(SQL.fillOptoutProbe);
    for (const o of optedOut) fill.run(o.rawUid, o.optedOutSinceMs);
    const changed = this.db.prepare(SQL.tombstoneByProbe).run(nowS).changes;
    this.db.prepare(SQL.clearOptoutProbe).run();
    return changed;
  }

  // ---- counts and runs

  counts(nowS?: number): StateCounts {
    const [entries, mapped, optout, invalid] = this.stmts.countsByStatus.raw().get() as (number | null)[];
    // sum() over no rows is NULL
    const result: StateCounts = { entries: entries ?? 0, mapped: mapped ?? 0, optout: optout ?? 0, invalid: invalid ?? 0 };
    if (nowS !== undefined) {
      const now = Math.floor(nowS);
      const both = this.stmts.countDueBoth.pluck().get(now) as number;
      result.due = this.countDue(now) + this.countDueV2() - both;
    }
    return result;
  }

  startRun(command: string, argsJson: string, nowS: number = Date.now() / 1000): number {
    this.writable('record a run');
    return Number(this.stmts.startRun.run(command, argsJson, process.pid, Math.floor(nowS)).lastInsertRowid);
  }

  finishRun(id: number, summaryJson: string, exitCode: number, nowS: number = Date.now() / 1000): void {
    this.writable('record a run');
    this.stmts.finishRun.run(Math.floor(nowS), summaryJson, exitCode, id);
  }

  listRuns(limit: number): RunRecord[] {
    const rows = this.stmts.listRuns.raw().all(pageLimit(limit)) as [number, string, string, number, number | null, string | null, number | null][];
    return rows.map(([id, command, args, startedAtS, finishedAtS, summary, exitCode]) => ({
      id,
      command,
      args,
      startedAtS,
      finishedAtS,
      summary,
      exitCode,
    }));
  }

  // ---- lock and life cycle

  lock(): void {
    this.lockFile.acquire();
  }

  get locked(): boolean {
    return this.lockFile.held;
  }

  integrityCheck(): string {
    const findings = this.db.pragma('integrity_check', { simple: false }) as { integrity_check: string }[];
    const lines = findings.map((f) => f.integrity_check);
    return lines.length === 1 && lines[0] === 'ok' ? 'ok' : lines.join('\n');
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
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
    upsertMapped: plain(SQL.upsertMapped),
    upsertOptout: plain(SQL.upsertOptout),
    upsertInvalid: plain(SQL.upsertInvalid),
    countDue: plain(SQL.countDue),
    dueByDay: plain(SQL.dueByDay),
    selectDueFirst: raw(SQL.selectDueFirst),
    selectDueSameR: raw(SQL.selectDueSameR),
    selectDueLaterR: raw(SQL.selectDueLaterR),
    selectDueV2: raw(SQL.selectDueV2),
    countDueV2: plain(SQL.countDueV2),
    countDueBoth: plain(SQL.countDueBoth),
    markBucketRotated: plain(SQL.markBucketRotated),
    markAllMappedDue: plain(SQL.markAllMappedDue),
    markBucketEntriesDue: plain(SQL.markBucketEntriesDue),
    bucketEntries: plain(SQL.bucketEntries),
    sweepNeverChecked: raw(SQL.sweepNeverChecked),
    sweepSameCheck: raw(SQL.sweepSameCheck),
    sweepLaterCheck: raw(SQL.sweepLaterCheck),
    countWithRawUid: plain(SQL.countWithRawUid),
    recordOptoutCheck: plain(SQL.recordOptoutCheck),
    tombstoneById: plain(SQL.tombstoneById),
    countsByStatus: plain(SQL.countsByStatus),
    metaAll: plain(SQL.metaAll),
    metaGet: plain(SQL.metaGet),
    metaSet: plain(SQL.metaSet),
    startRun: plain(SQL.startRun),
    finishRun: plain(SQL.finishRun),
    listRuns: plain(SQL.listRuns),
  };
}

function prepareJournal(db: Database) {
  return {
    insert: db.prepare(SQL.insertPendingChange),
    select: db.prepare(SQL.pendingChanges).raw(),
    last: db.prepare(SQL.lastPendingChange).pluck(),
    ack: db.prepare(SQL.ackChanges),
  };
}

function inListSize(n: number): number {
  for (const size of IN_LIST_SIZES) if (n <= size) return size;
  return MAX_IN_LIST;
}

function pageLimit(limit: number): number {
  return Number.isFinite(limit) ? Math.max(0, Math.floor(limit)) : 0;
}

function utcDay(seconds: number): string {
  return new Date(seconds * 1000).toISOString().slice(0, 10);
}

function decodeEntry(row: Row): StateEntry {
  return {
    id: row[0] as number,
    type: TYPE_OF_CODE[row[1] as number],
    hash: row[2] as string,
    status: statusOfCode(row[3] as number),
    u: row[4] as string | null,
    p: row[5] as string | null,
    r: row[6] as number | null,
    bucketId: row[7] as string | null,
    firstMappedS: row[8] as number | null,
    lastMappedS: row[9] as number | null,
    lastOptoutCheckS: row[10] as number | null,
    optedOutSinceMs: row[11] as number | null,
    due: row[12] === 1,
  };
}

function decodeDue(row: Row): DueEntry {
  return {
    id: row[0] as number,
    type: TYPE_OF_CODE[row[1] as number],
    hash: row[2] as string,
    u: row[3] as string | null,
    p: row[4] as string | null,
    r: row[5] as number | null,
    bucketId: row[6] as string | null,
  };
}

function decodeCandidate(row: Row): OptoutCandidate {
  return {
    id: row[0] as number,
    u: row[1] as string | null,
    p: row[2] as string | null,
    lastOptoutCheckS: row[3] as number | null,
    type: TYPE_OF_CODE[row[4] as number],
    hash: row[5] as string,
  };
}
