import type { DiiType } from '../../identity/index.js';
import {
  isMappedV3,
  MAX_ITEMS_PER_REQUEST,
  type MapV3Item,
  type MapV3Request,
  type MapV3ResponseBody,
} from '../../protocol/index.js';
import type { ChangeJournalRows, DueCursor, DueEntry, EntryUpdate, PendingChange } from '../../state/types.js';
import { bucketIdOf, mappedOutcome } from '../map/bucket-answer.js';
import {
  type ChangeChannel,
  type ChangeJournal,
  parseJournalRow,
  replayPendingChanges,
} from '../run/change-journal.js';
import { AdaptiveConcurrency } from '../run/adaptive-limiter.js';
import { asError, RunLifecycle, type RunOutcome } from '../run/run-lifecycle.js';
import { hashCell, type HashEncoding } from '../io/output/hash-cells.js';
import { timeCell, timeType, type TimeFormat, type TypedHeader } from '../io/typed-cells.js';

/**
 * What the engine needs of a state: pages of due entries (a file's by day of r then id, a database's by id) and
 * one transaction per batch; a file's answers come at once, a database's as promises.
 */
export interface RemapState {
  selectDue(nowS: number, after: DueCursor | null, limit: number): DueEntry[] | Promise<DueEntry[]>;
  commitBatch(updates: readonly EntryUpdate[], nowS: number, journal?: ChangeJournalRows): void | Promise<void>;
}

/** Sends one v3 map request (with the client's retries) and returns the decrypted body. */
export type RemapBatchFn = (request: MapV3Request, signal: AbortSignal) => Promise<MapV3ResponseBody>;

export type RemapStatus = 'mapped' | 'optout' | 'invalid';

/**
 * One row of the changes file: an entry whose raw UID changed, or that became opted out or invalid. This is what
 * a user uploads to their platform, so an entry that kept its raw UID (only `r` moved) is not in it.
 */
export interface RemapChange {
  kind: DiiType;
  hash: string;
  oldRawUid: string | null;
  /** Null for optout and invalid. */
  newRawUid: string | null;
  prevRawUid: string | null;
  /** The new `r`, Unix seconds; null for optout and invalid. */
  refreshFrom: number | null;
  status: RemapStatus;
  /** v2 answers only: the salt bucket of the new raw UID. */
  bucketId?: string | null;
}

/**
 * The changes file's columns, named as `map` names the same things (`map --emit-hash` writes hash and hash_type,
 * so the two join on them): the entry's hash_type and hash, its raw UID before, then raw_uid, prev_raw_uid and
 * refresh_from as the service answered now, and the status.
 */
export const CHANGES_HEADER = [
  'hash_type',
  'hash',
  'old_raw_uid',
  'raw_uid',
  'prev_raw_uid',
  'refresh_from',
  'status',
] as const;
/** The changes file of a v2 state: the v3 columns (empty where v2 has nothing), then the salt bucket. */
export const CHANGES_HEADER_V2 = [...CHANGES_HEADER, 'bucket_id'] as const;

/** The changes file's columns and their types (refresh_from by the time format), v2's with the salt bucket. */
export function changesColumns(timeFormat: TimeFormat = 'unix', v2 = false): TypedHeader {
  const header: string[] = v2 ? [...CHANGES_HEADER_V2] : [...CHANGES_HEADER];
  return { header, types: header.map((name) => (name === 'refresh_from' ? timeType(timeFormat) : 'string')) };
}

/** A change as cells under CHANGES_HEADER, the hash in `hashEncoding` (default base64); a missing value is an empty cell. */
export function changeCells(
  change: RemapChange,
  timeFormat: TimeFormat = 'unix',
  hashEncoding: HashEncoding = 'base64',
): string[] {
  return [
    change.kind,
    hashCell(change.hash, hashEncoding),
    change.oldRawUid ?? '',
    change.newRawUid ?? '',
    change.prevRawUid ?? '',
    change.refreshFrom === null ? '' : timeCell(change.refreshFrom, timeFormat),
    change.status,
  ];
}

/** A change as cells under CHANGES_HEADER_V2. */
export function changeCellsV2(
  change: RemapChange,
  timeFormat: TimeFormat = 'unix',
  hashEncoding: HashEncoding = 'base64',
): string[] {
  const cells = changeCells(change, timeFormat, hashEncoding);
  cells.push(change.bucketId ?? '');
  return cells;
}

/**
 * Where a run journals its change rows: each batch's rows go into the state file's pending changes with the
 * batch's commit, so a run killed before its changes file is committed leaves them for the next run.
 */
export interface RemapJournal {
  runId: number;
  /** The run's own rows (change-journal.ts changeChannel): those it delivers and acknowledges. */
  channel: ChangeChannel;
  state: { lastPendingChangeId(channel: ChangeChannel): number | null | Promise<number | null> };
}

const STATUSES: ReadonlySet<string> = new Set<RemapStatus>(['mapped', 'optout', 'invalid']);

function isRemapChange(value: unknown): value is RemapChange {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  const textOrNull = (x: unknown): boolean => x === null || typeof x === 'string';
  return (
    (v.kind === 'email' || v.kind === 'phone') &&
    typeof v.hash === 'string' &&
    textOrNull(v.oldRawUid) &&
    textOrNull(v.newRawUid) &&
    textOrNull(v.prevRawUid) &&
    (v.refreshFrom === null || typeof v.refreshFrom === 'number') &&
    typeof v.status === 'string' &&
    STATUSES.has(v.status) &&
    (v.bucketId === undefined || textOrNull(v.bucketId))
  );
}

/**
 * Writes the change rows that earlier runs committed but whose changes file was never committed (killed,
 * interrupted, failed) through `onChanges`, before this run's own; returns how many.
 */
export async function replayRemapChanges(
  journal: ChangeJournal,
  channel: ChangeChannel,
  onChanges: (changes: RemapChange[]) => void | Promise<void>,
): Promise<number> {
  return replayPendingChanges(journal, channel, (rows: PendingChange[]) =>
    onChanges(rows.map((r) => parseJournalRow(r, isRemapChange, 'remap change'))),
  );
}

export interface RemapCounts {
  /** Due entries selected and put into batches. */
  selected: number;
  /** Entries answered, by what the service said. */
  status: { mapped: number; optout: number; invalid: number; error: number };
  /** Mapped entries whose raw UID changed. */
  changed: number;
  /** Mapped entries that kept their raw UID (only `r` moved). */
  unchanged: number;
  /** Mapped entries whose new `r` is still not after the run's now (a --now ahead of the service's clock). */
  stillDue: number;
  /** Rows handed to onChanges. */
  changeRows: number;
  batches: number;
  batchesFailed: number;
  batchesCommitted: number;
}

/** How a remap run ended: the same outcomes as a map run (a failure is one every further batch would hit too). */
export type RemapOutcome = RunOutcome;

export interface RemapResult {
  outcome: RemapOutcome;
  counts: RemapCounts;
  /**
   * With a journal: the last pending change id once every committed batch's rows were handed to onChanges. An
   * output committed after that may acknowledge the pending changes up to it; null when nothing is pending.
   */
  journalUpTo: number | null;
  /** Why batches failed (first few distinct messages), for the user. */
  batchErrors: string[];
}

export interface RemapOptions {
  state: RemapState;
  mapBatch: RemapBatchFn;
  /** The run's now, Unix seconds: entries with r <= nowS are due. Fixed for the whole run. */
  nowS: number;
  /** Caps the entries remapped by this run. */
  limit?: number;
  /** Items per request (default and maximum 5,000). */
  batchSize?: number;
  /** Requests in flight at most, when no limiter is given (default 20). */
  concurrency?: number;
  /** Shared with the client, whose onRetry feeds it 429s. */
  limiter?: AdaptiveConcurrency;
  /** Aborting it stops selecting; in-flight requests get `graceMs` to finish and commit. */
  signal?: AbortSignal;
  /** Default 10,000 ms. */
  graceMs?: number;
  /**
   * Pages of due entries other than by `r` (v2: the entries marked due, by id), after the last entry of the
   * previous page. Without it the run walks what is due by r (state.selectDue).
   */
  selectPage?: (after: DueEntry | null, limit: number) => DueEntry[];
  /** Under --shard: whether a due entry is this runner's to re-map (the others are left for theirs). */
  share?: ((entry: DueEntry) => boolean) | undefined;
  /** Rows for the changes file, once their batch is committed; awaited (a sink's backpressure). */
  onChanges?: (changes: RemapChange[]) => void | Promise<void>;
  /** After each settled batch, for progress. */
  onProgress?: (counts: Readonly<RemapCounts>) => void;
  /** Journal each batch's change rows with its commit (not for dry runs, which commit nothing). */
  journal?: RemapJournal;
}

interface Batch {
  /** Its place in the run's selection order: the changes file gets batches' rows in this order. */
  seq: number;
  entries: DueEntry[];
  request: MapV3Request;
  email: DueEntry[];
  phone: DueEntry[];
}

/**
 * The nightly remap: walks the due entries (r <= now) page by page (a file's due lists cost what is due, a
 * database's walk one pass over its table); sends each page's stored hashes as one v3 request with at most N in flight;
 * commits each answered batch in one transaction. A committed entry gets an `r` in the future and drops out of
 * the due set, so an interrupted run resumes by running again. A failed batch is left as it was: still due.
 */
export class RemapEngine {
  readonly counts: RemapCounts = {
    selected: 0,
    status: { mapped: 0, optout: 0, invalid: 0, error: 0 },
    changed: 0,
    unchanged: 0,
    stillDue: 0,
    changeRows: 0,
    batches: 0,
    batchesFailed: 0,
    batchesCommitted: 0,
  };
  readonly limiter: AdaptiveConcurrency;
  private readonly batchSize: number;
  /** Stop, interrupt, wind-down, batch errors; its outstanding count: batches queued or in flight. */
  private readonly lifecycle: RunLifecycle;
  /**
   * Ids already sent by this run. Only a --now ahead of the service's clock can bring an answered entry back
   * into the due range (its new `r` is still <= now); it must not be sent twice in one run.
   */
  private readonly sent = new Set<number>();
  /**
   * The change rows of settled batches by their seq (none for a failed one), until every batch before them has
   * settled: the changes file lists rows in selection order (the state's walk), not in the order answers arrive.
   */
  private readonly settledChanges = new Map<number, RemapChange[]>();
  private nextSeq = 0;
  /** The seq of the next batch to deliver. */
  private deliverSeq = 0;

  constructor(private readonly options: RemapOptions) {
    this.limiter = options.limiter ?? new AdaptiveConcurrency({ max: options.concurrency ?? 20 });
    this.batchSize = Math.min(MAX_ITEMS_PER_REQUEST, Math.max(1, options.batchSize ?? MAX_ITEMS_PER_REQUEST));
    // every request in flight listens on the run's signal; 20 of them are expected, not a leak
    this.lifecycle = new RunLifecycle({ maxListeners: this.limiter.max + 10, graceMs: options.graceMs });
  }

  async run(): Promise<RemapResult> {
    const unlisten = this.lifecycle.listenForInterrupt(this.options.signal);
    try {
      let cursor: DueCursor | null = null;
      let lastSelected: DueEntry | null = null;
      let exhausted = false;
      while (!this.lifecycle.stopped && !exhausted) {
        // one page selected ahead of the requests in flight keeps every slot busy without holding the whole due set
        while (!this.lifecycle.stopped && this.lifecycle.outstanding > this.limiter.concurrency) {
          await this.lifecycle.settled();
          await this.flushChanges();
        }
        if (this.lifecycle.stopped) break;
        const want = Math.min(this.batchSize, this.remaining());
        if (want <= 0) break;
        const selectPage = this.options.selectPage;
        const selected: DueEntry[] | Promise<DueEntry[]> =
          selectPage !== undefined
            ? selectPage(lastSelected, want)
            : this.options.state.selectDue(this.options.nowS, cursor, want);
        // a file answers at once: no await, so its run goes exactly as it always has
        const page: DueEntry[] = Array.isArray(selected) ? selected : await selected;
        if (page.length < want) exhausted = true;
        if (page.length === 0) break;
        const last = page[page.length - 1];
        cursor = { r: last.r, id: last.id };
        lastSelected = last;
        const share = this.options.share;
        const entries = page.filter((e) => !this.sent.has(e.id) && (share === undefined || share(e)));
        if (entries.length === 0) continue;
        for (const e of entries) this.sent.add(e.id);
        this.dispatch(entries);
        await this.flushChanges();
      }
      while (this.lifecycle.outstanding > 0 && !this.lifecycle.stopped) {
        await this.lifecycle.settled();
        await this.flushChanges();
      }
    } catch (err) {
      this.lifecycle.halt({ kind: 'failed', error: asError(err) });
    } finally {
      unlisten();
    }
    if (this.lifecycle.stopped) await this.lifecycle.windDown();
    // a batch that never settled leaves a gap: what settled after it is delivered anyway, still in seq order
    await this.flushChanges(true);
    // a batch still in flight may commit during that await; the id is read with nothing left unhanded, and
    // with no await between the check and the read, so no row up to it can have missed onChanges
    while (this.settledChanges.size > 0) await this.flushChanges(true);
    const journal = this.options.journal;
    const upTo = journal === undefined ? null : journal.state.lastPendingChangeId(journal.channel);
    const journalUpTo = upTo instanceof Promise ? await upTo : upTo;
    return {
      outcome: this.lifecycle.outcome(),
      counts: this.counts,
      batchErrors: this.lifecycle.batchErrors,
      journalUpTo,
    };
  }

  private remaining(): number {
    return this.options.limit === undefined ? Number.POSITIVE_INFINITY : this.options.limit - this.counts.selected;
  }

  private dispatch(entries: DueEntry[]): void {
    const email: DueEntry[] = [];
    const phone: DueEntry[] = [];
    for (const e of entries) (e.type === 'email' ? email : phone).push(e);
    const request: MapV3Request = {};
    if (email.length > 0) request.email_hash = email.map((e) => e.hash);
    if (phone.length > 0) request.phone_hash = phone.map((e) => e.hash);
    this.counts.selected += entries.length;
    this.counts.batches++;
    const seq = this.nextSeq++;
    void this.lifecycle.inFlight(() => this.limiter.run(() => this.send({ seq, entries, request, email, phone })));
  }

  private async send(batch: Batch): Promise<void> {
    try {
      if (this.lifecycle.stopped) {
        this.failBatch(batch, 'not sent: the run stopped first', false);
        return;
      }
      let body: MapV3ResponseBody;
      try {
        body = await this.options.mapBatch(batch.request, this.lifecycle.abort.signal);
      } catch (err) {
        this.onBatchError(batch, asError(err));
        return;
      }
      this.lifecycle.noteBatchAnswered();
      const committing = this.onBatchAnswered(batch, body);
      if (committing !== undefined) await committing;
    } catch (err) {
      // a commit that throws (disk full, file locked) would fail every later batch the same way
      this.lifecycle.halt({ kind: 'failed', error: asError(err) });
      this.failBatch(batch, 'not committed: the state file could not be written', false);
    } finally {
      // a batch that failed has no rows, but its turn in the order is over
      if (!this.settledChanges.has(batch.seq)) this.settledChanges.set(batch.seq, []);
      this.options.onProgress?.(this.counts);
    }
  }

  /** Commits the batch's answers; a promise while a database commits them. */
  private onBatchAnswered(batch: Batch, body: MapV3ResponseBody): Promise<void> | undefined {
    const emailAnswers = body.email_hash ?? [];
    const phoneAnswers = body.phone_hash ?? [];
    if (emailAnswers.length !== batch.email.length || phoneAnswers.length !== batch.phone.length) {
      this.onBatchError(
        batch,
        new Error(
          `the service answered ${emailAnswers.length} email and ${phoneAnswers.length} phone hashes for ` +
            `${batch.email.length} and ${batch.phone.length} sent`,
        ),
      );
      return undefined;
    }
    const answerOf = new Map<DueEntry, MapV3Item>();
    for (let i = 0; i < emailAnswers.length; i++) answerOf.set(batch.email[i], emailAnswers[i]);
    for (let i = 0; i < phoneAnswers.length; i++) answerOf.set(batch.phone[i], phoneAnswers[i]);
    const updates: EntryUpdate[] = [];
    const changes: RemapChange[] = [];
    const tally = { mapped: 0, optout: 0, invalid: 0, changed: 0, unchanged: 0, stillDue: 0 };
    const take = (entry: DueEntry, answer: MapV3Item): void => {
      const result = settleEntry(entry, answer);
      updates.push(result.update);
      tally[result.status]++;
      if (result.change !== null) changes.push(result.change);
      if (result.status === 'mapped') {
        if (result.change !== null) tally.changed++;
        else tally.unchanged++;
        if (isMappedV3(answer) && answer.r <= this.options.nowS) tally.stillDue++;
      }
    };
    // in the batch's selection order, emails and phones as they came, so its change rows are in that order too
    for (const entry of batch.entries) take(entry, answerOf.get(entry) as MapV3Item);
    // the commit is the point of no return: counts and changes only for what is in the state
    const journal = this.options.journal;
    const committed =
      journal !== undefined && changes.length > 0
        ? this.options.state.commitBatch(updates, this.options.nowS, {
            runId: journal.runId,
            channel: journal.channel,
            rows: changes.map((c) => JSON.stringify(c)),
          })
        : this.options.state.commitBatch(updates, this.options.nowS);
    const count = (): void => this.countCommitted(batch, changes, tally);
    if (committed instanceof Promise) return committed.then(count);
    count();
    return undefined;
  }

  private countCommitted(
    batch: Batch,
    changes: RemapChange[],
    tally: { mapped: number; optout: number; invalid: number; changed: number; unchanged: number; stillDue: number },
  ): void {
    const c = this.counts;
    c.batchesCommitted++;
    c.status.mapped += tally.mapped;
    c.status.optout += tally.optout;
    c.status.invalid += tally.invalid;
    c.changed += tally.changed;
    c.unchanged += tally.unchanged;
    c.stillDue += tally.stillDue;
    this.settledChanges.set(batch.seq, changes);
    this.limiter.succeeded();
  }

  private onBatchError(batch: Batch, error: Error): void {
    if (this.lifecycle.cutShort()) {
      this.failBatch(batch, 'not answered: the run stopped first', false);
      return;
    }
    this.lifecycle.haltOnBatchError(error);
    this.failBatch(batch, error.message, true);
  }

  private failBatch(batch: Batch, reason: string, failed: boolean): void {
    this.counts.status.error += batch.entries.length;
    if (failed) this.counts.batchesFailed++;
    this.lifecycle.noteBatchError(reason);
  }

  /**
   * Hands the rows of settled batches to onChanges in seq order, up to the first batch not settled yet; with
   * `pastGaps`, past it too (the end of a run: a batch that never settles must not hold back committed rows).
   */
  private async flushChanges(pastGaps = false): Promise<void> {
    for (;;) {
      const rows: RemapChange[] = [];
      while (this.settledChanges.has(this.deliverSeq)) {
        rows.push(...(this.settledChanges.get(this.deliverSeq) as RemapChange[]));
        this.settledChanges.delete(this.deliverSeq++);
      }
      if (pastGaps && rows.length === 0 && this.settledChanges.size > 0) {
        this.deliverSeq = Math.min(...this.settledChanges.keys());
        continue;
      }
      if (rows.length === 0) return;
      this.counts.changeRows += rows.length;
      if (this.options.onChanges) await this.options.onChanges(rows);
    }
  }
}

/** What one answer does to one due entry: its state update, its status, and its changes-file row if any. */
export function settleEntry(
  entry: DueEntry,
  answer: MapV3Item,
): { update: EntryUpdate; status: RemapStatus; change: RemapChange | null } {
  const base = { kind: entry.type, hash: entry.hash, oldRawUid: entry.u };
  if (isMappedV3(answer)) {
    const outcome = mappedOutcome(answer);
    const update: EntryUpdate = { type: entry.type, hash: entry.hash, outcome };
    const change: RemapChange | null =
      answer.u === entry.u
        ? null
        : {
            ...base,
            newRawUid: answer.u,
            prevRawUid: outcome.p,
            refreshFrom: outcome.r,
            status: 'mapped',
            bucketId: bucketIdOf(answer),
          };
    return { update, status: 'mapped', change };
  }
  const status: RemapStatus = answer.e === 'optout' ? 'optout' : 'invalid';
  return {
    update: { type: entry.type, hash: entry.hash, outcome: { kind: status } },
    status,
    change: { ...base, newRawUid: null, prevRawUid: null, refreshFrom: null, status },
  };
}
