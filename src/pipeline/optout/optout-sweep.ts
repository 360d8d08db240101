import { isRawUidShape } from '../../identity/index.js';
import { MAX_ITEMS_PER_REQUEST, type OptedOutItem } from '../../protocol/index.js';
import { AdaptiveConcurrency } from '../run/adaptive-limiter.js';
import { asError, RunLifecycle, type RunOutcome } from '../run/run-lifecycle.js';
import type {
  ChangeJournalRows,
  OptedOutRawUid,
  OptoutCandidate,
  OptoutCursor,
  PendingChange,
} from '../../state/types.js';
import {
  type ChangeChannel,
  type ChangeJournal,
  parseJournalRow,
  replayPendingChanges,
} from '../run/change-journal.js';
import { rowProblemInvalidates, rowProblemReason, type InputRow } from '../io/table.js';
import { timeCellOfMs, timeType, type ColumnType, type TimeFormat } from '../io/typed-cells.js';

/** Asks POST /v2/optout/status about up to 5,000 raw UIDs (with the client's retries); only opted-out ones come back. */
export type OptoutStatusFn = (rawUids: string[], signal: AbortSignal) => Promise<OptedOutItem[]>;

/** What became of one raw UID. */
export type RawUidVerdict =
  | { kind: 'opted_out'; sinceMs: number }
  | { kind: 'not_opted_out' }
  /** Not the shape of a raw UID: reported, never sent. */
  | { kind: 'invalid'; reason: string }
  /** An empty cell: nothing to check (`map` calls an empty identifier cell missing too). Never sent. */
  | { kind: 'missing'; reason: string }
  /** Its batch failed after the client's last attempt. */
  | { kind: 'error'; reason: string };

export const INVALID_RAW_UID = 'not a raw UID: must be 44 characters of base64';
export const EMPTY_RAW_UID = 'empty: no raw UID in this row';

/** The cell as it is sent: surrounding spaces and tabs are not part of any raw UID; its case is kept. */
export function rawUidOfCell(cell: string): { ok: true; rawUid: string } | { ok: false; reason: string } {
  const trimmed = cell.replace(/^[ \t]+|[ \t]+$/g, '');
  if (trimmed === '') return { ok: false, reason: EMPTY_RAW_UID };
  return isRawUidShape(trimmed) ? { ok: true, rawUid: trimmed } : { ok: false, reason: INVALID_RAW_UID };
}

/** Output columns added to each input row. */
export const VERDICT_COLUMNS = ['opted_out', 'opted_out_since', 'reason'] as const;

/** The types of VERDICT_COLUMNS: a boolean, a time (to the second, as `map` writes refresh_from), a text. */
export function verdictTypes(timeFormat: TimeFormat = 'unix'): ColumnType[] {
  return ['boolean', timeType(timeFormat), 'string'];
}

/** opted_out, opted_out_since (by the time format, to the second), reason: empty cells where a value does not apply. */
export function verdictCells(verdict: RawUidVerdict, timeFormat: TimeFormat = 'unix'): [string, string, string] {
  switch (verdict.kind) {
    case 'opted_out':
      return ['true', timeCellOfMs(verdict.sinceMs, timeFormat), ''];
    case 'not_opted_out':
      return ['false', '', ''];
    case 'invalid':
    case 'missing':
    case 'error':
      return ['', '', verdict.reason];
  }
}

export interface OptoutCounts {
  /** Input rows, or raw UIDs of the state checked. */
  rows: number;
  status: { opted_out: number; not_opted_out: number; invalid: number; missing: number; error: number };
  /** Raw UIDs sent (each distinct raw UID of a batch once). */
  sent: number;
  batches: number;
  batchesFailed: number;
}

/** How an opt-out run ended (the outcomes every engine shares). */
export type OptoutOutcome = RunOutcome;

export interface OptoutResult<C extends OptoutCounts = OptoutCounts> {
  outcome: OptoutOutcome;
  counts: C;
  batchErrors: string[];
}

export interface OptoutRunOptions {
  check: OptoutStatusFn;
  /**
   * The public service's rule: one batch at a time, on one connection, so this is 1 unless a private operator
   * is used. Each batch is awaited before the next is sent.
   */
  concurrency?: number;
  /** Raw UIDs per request (default and maximum 5,000). */
  batchSize?: number;
  signal?: AbortSignal;
}

/** A batch of distinct raw UIDs and whatever the caller needs to report on it. */
interface CheckBatch<P> {
  rawUids: string[];
  payload: P;
}

/** A settled batch: the answer per raw UID of the batch (missing ones were not opted out), or why it failed. */
type BatchAnswer = { ok: true; optedOut: ReadonlyMap<string, number> } | { ok: false; reason: string };

/**
 * Sends batches in order with at most `concurrency` in flight and hands the answers back in the same order.
 * With concurrency 1 a batch is sent only once the previous one was answered: the opt-out endpoint's rule for
 * the public service. Batches are built while the previous one is in flight, so the connection is never idle.
 */
class OrderedChecker<P> {
  readonly limiter: AdaptiveConcurrency;
  /** Stop, interrupt and the batch errors of the run. */
  readonly lifecycle: RunLifecycle;

  constructor(
    private readonly options: OptoutRunOptions,
    private readonly counts: OptoutCounts,
  ) {
    this.limiter = new AdaptiveConcurrency({ max: Math.max(1, options.concurrency ?? 1) });
    this.lifecycle = new RunLifecycle({ maxListeners: this.limiter.max + 10 });
  }

  async run(
    batches: AsyncIterable<CheckBatch<P>>,
    settle: (batch: CheckBatch<P>, answer: BatchAnswer) => Promise<void>,
  ): Promise<OptoutOutcome> {
    const unlisten = this.lifecycle.listenForInterrupt(this.options.signal);
    const queue: { batch: CheckBatch<P>; answer: Promise<BatchAnswer> }[] = [];
    try {
      for await (const batch of batches) {
        if (this.lifecycle.stopped) break;
        if (batch.rawUids.length > 0) this.counts.batches++;
        queue.push({
          batch,
          answer:
            batch.rawUids.length === 0
              ? Promise.resolve(NOTHING_SENT)
              : this.limiter.run(() => this.send(batch.rawUids)),
        });
        while (queue.length > this.limiter.max) {
          const head = queue.shift() as (typeof queue)[number];
          await settle(head.batch, await head.answer);
        }
      }
      while (queue.length > 0) {
        const head = queue.shift() as (typeof queue)[number];
        await settle(head.batch, await head.answer);
      }
    } catch (err) {
      this.lifecycle.halt({ kind: 'failed', error: asError(err) });
      // answers already on their way are not reported; they were not written either
      await Promise.allSettled(queue.map((q) => q.answer));
    } finally {
      unlisten();
    }
    return this.lifecycle.outcome();
  }

  private async send(rawUids: string[]): Promise<BatchAnswer> {
    if (this.lifecycle.stopped) return { ok: false, reason: 'not sent: the run stopped first' };
    this.counts.sent += rawUids.length;
    try {
      const items = await this.options.check(rawUids, this.lifecycle.abort.signal);
      this.lifecycle.noteBatchAnswered();
      const optedOut = new Map<string, number>();
      for (const item of items) optedOut.set(item.advertising_id, item.opted_out_since);
      this.limiter.succeeded();
      return { ok: true, optedOut };
    } catch (err) {
      const error = asError(err);
      this.lifecycle.haltOnBatchError(error);
      this.counts.batchesFailed++;
      this.lifecycle.noteBatchError(error.message);
      return { ok: false, reason: error.message };
    }
  }
}

const NOTHING_SENT: BatchAnswer = { ok: true, optedOut: new Map() };

function verdictOf(rawUid: string, answer: BatchAnswer): RawUidVerdict {
  if (!answer.ok) return { kind: 'error', reason: answer.reason };
  const since = answer.optedOut.get(rawUid);
  return since === undefined ? { kind: 'not_opted_out' } : { kind: 'opted_out', sinceMs: since };
}

function countVerdict(counts: OptoutCounts, verdict: RawUidVerdict): void {
  counts.status[verdict.kind]++;
}

function emptyCounts(): OptoutCounts {
  return {
    rows: 0,
    status: { opted_out: 0, not_opted_out: 0, invalid: 0, missing: 0, error: 0 },
    sent: 0,
    batches: 0,
    batchesFailed: 0,
  };
}

function batchLimit(options: OptoutRunOptions): number {
  return Math.min(MAX_ITEMS_PER_REQUEST, Math.max(1, options.batchSize ?? MAX_ITEMS_PER_REQUEST));
}

// ---------------------------------------------------------------------------------------------------------------
// Raw UIDs from a table

export interface CheckedRow {
  row: InputRow;
  verdict: RawUidVerdict;
}

export interface RowCheckOptions extends OptoutRunOptions {
  /** Position of the raw-UID column in InputRow.cells. */
  column: number;
  /** Rows in input order, each with its verdict; awaited (a sink's backpressure). */
  onRows: (rows: CheckedRow[]) => void | Promise<void>;
}

/** Rows of one request: every row read while its raw UIDs were collected, valid or not, in input order. */
interface RowBatch {
  rows: InputRow[];
  /** Per row: the raw UID sent for it, or why none was. */
  ids: ({ ok: true; rawUid: string } | { ok: false; reason: string })[];
}

/** Bounds a batch's rows when most rows are invalid, so memory stays flat whatever the input. */
const MAX_ROWS_PER_BATCH = 4 * MAX_ITEMS_PER_REQUEST;

/**
 * optout-check over a table: each row's raw UID checked once per batch (repeats in a batch are sent once),
 * rows whose cell is not a raw UID reported as invalid (an empty one as missing) and never sent, every row handed
 * back in input order.
 */
export async function checkRawUidRows(
  source: AsyncIterable<InputRow[]>,
  options: RowCheckOptions,
): Promise<OptoutResult> {
  const counts = emptyCounts();
  const checker = new OrderedChecker<RowBatch>(options, counts);
  const limit = batchLimit(options);

  async function* batches(): AsyncGenerator<CheckBatch<RowBatch>> {
    let current: RowBatch = { rows: [], ids: [] };
    let distinct = new Set<string>();
    const seal = (): CheckBatch<RowBatch> => {
      const batch = { rawUids: [...distinct], payload: current };
      current = { rows: [], ids: [] };
      distinct = new Set();
      return batch;
    };
    for await (const chunk of source) {
      for (const row of chunk) {
        const id =
          row.problem !== undefined && rowProblemInvalidates(row.problem)
            ? { ok: false as const, reason: rowProblemReason(row.problem) }
            : rawUidOfCell(row.cells[options.column] ?? '');
        if (id.ok && !distinct.has(id.rawUid) && distinct.size >= limit) yield seal();
        current.rows.push(row);
        current.ids.push(id);
        if (id.ok) distinct.add(id.rawUid);
        if (current.rows.length >= MAX_ROWS_PER_BATCH) yield seal();
      }
    }
    if (current.rows.length > 0) yield seal();
  }

  const outcome = await checker.run(batches(), async (batch, answer) => {
    const { rows, ids } = batch.payload;
    const out: CheckedRow[] = new Array(rows.length);
    for (let i = 0; i < rows.length; i++) {
      const id = ids[i];
      const verdict: RawUidVerdict = id.ok
        ? verdictOf(id.rawUid, answer)
        : { kind: id.reason === EMPTY_RAW_UID ? 'missing' : 'invalid', reason: id.reason };
      countVerdict(counts, verdict);
      out[i] = { row: rows[i], verdict };
    }
    counts.rows += rows.length;
    await options.onRows(out);
  });
  return { outcome, counts, batchErrors: checker.lifecycle.batchErrors };
}

/** Names of a raw-UID column, compared without case, spaces, dashes or underscores. */
const RAW_UID_COLUMN_NAMES = new Set([
  'rawuid',
  'rawuid2',
  'advertisingid',
  'uid',
  'uid2',
  'rawuid2s',
  'rawuids',
  'euid',
  'raweuid',
]);

function squash(name: string): string {
  return name.toLowerCase().replace(/[\s_-]+/g, '');
}

/**
 * A raw UID column of this tool's own `map` output: `<prefix>raw_uid` (`email_raw_uid`, `uid2_raw_uid`), named by
 * an identifier column or --result-prefix; `<prefix>prev_raw_uid` is the previous raw UID, not the current one.
 */
function isResultRawUid(name: string): boolean {
  const lower = name.toLowerCase();
  return lower.endsWith('_raw_uid') && !lower.endsWith('prev_raw_uid');
}

export type ColumnChoice = { ok: true; index: number } | { ok: false; message: string };

/**
 * The raw-UID column: `--col` by name (exact, then without case), or the one header named like a raw UID.
 * A one-column table needs no name. Messages list the header names, which are not personal data.
 */
export function pickRawUidColumn(header: readonly string[], col: string | undefined): ColumnChoice {
  const names = header.map((h) => `'${h}'`).join(', ');
  if (col !== undefined) {
    let index = header.indexOf(col);
    if (index < 0) {
      const lower = header.map((h) => h.toLowerCase());
      index = lower.indexOf(col.toLowerCase());
      if (index >= 0 && lower.indexOf(col.toLowerCase(), index + 1) >= 0) index = -1;
    }
    return index >= 0
      ? { ok: true, index }
      : { ok: false, message: `--col '${col}' is not a column of the input (columns: ${names})` };
  }
  if (header.length === 0)
    return { ok: false, message: 'the input is empty: there is no header and no raw UID column' };
  if (header.length === 1) return { ok: true, index: 0 };
  const matches = header.flatMap((h, i) => (RAW_UID_COLUMN_NAMES.has(squash(h)) || isResultRawUid(h) ? [i] : []));
  if (matches.length === 1) return { ok: true, index: matches[0] };
  if (matches.length === 0)
    return {
      ok: false,
      message: `no column named like a raw UID (raw_uid, advertising_id, uid, raw_uid2, or map's <prefix>_raw_uid) among ${names}: name it with --col`,
    };
  return {
    ok: false,
    message: `several columns look like raw UIDs (${matches.map((i) => `'${header[i]}'`).join(', ')}): choose one with --col`,
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Raw UIDs of the state file

/** What the sweep needs from the state: a file's answers come at once, a database's as promises (awaited alike). */
export interface SweepState {
  selectForOptoutCheck(
    limit: number,
    after: OptoutCursor | null,
    upTo?: number,
  ): OptoutCandidate[] | Promise<OptoutCandidate[]>;
  sweepCursor(): OptoutCursor | Promise<OptoutCursor>;
  countWithRawUid(): number | Promise<number>;
  recordOptoutChecks(ids: readonly number[], nowS: number, cursor?: OptoutCursor): void | Promise<void>;
  tombstoneByRawUid(
    optedOut: readonly OptedOutRawUid[],
    nowS: number,
    within?: readonly number[],
    journal?: ChangeJournalRows,
  ): number | Promise<number>;
}

/** Which raw UID of an entry was checked: the current one (u) or the previous one (p). */
export type RawUidSlot = 'u' | 'p';

export interface SweptRawUid {
  entry: OptoutCandidate;
  which: RawUidSlot;
  rawUid: string;
  verdict: RawUidVerdict;
}

export interface SweepCounts extends OptoutCounts {
  /** Entries this run set out to check (the fraction of the state, or all entries with a raw UID). */
  planned: number;
  /** Entries whose raw UIDs were answered, and whose check time was recorded. */
  entries: number;
  /** Entries tombstoned because their u or p opted out. */
  tombstoned: number;
}

export interface SweepOptions extends OptoutRunOptions {
  state: SweepState;
  /** The run's now, Unix seconds: recorded as each entry's last check. */
  nowS: number;
  /**
   * Check ceil(fraction * entries with a raw UID), in id order from where the last sweep stopped (wrapping to the
   * first entry once at most); default: all of them.
   */
  fraction?: number;
  /** Under --shard: whether an entry is this runner's to check (the others are passed over, left for theirs). */
  share?: ((entry: OptoutCandidate) => boolean) | undefined;
  /** Every raw UID checked, batch by batch, once the batch is saved; awaited. */
  onChecked?: (rows: SweptRawUid[]) => void | Promise<void>;
  /**
   * Journal the opted-out rows of each batch with its tombstones, so that a run killed before its output is
   * committed leaves them for the next run's output (not for dry runs).
   */
  journal?: {
    runId: number;
    /** The run's own rows (change-journal.ts changeChannel): those it delivers and acknowledges. */
    channel: ChangeChannel;
    state: { lastPendingChangeId(channel: ChangeChannel): number | null | Promise<number | null> };
  };
}

export interface SweepResult extends OptoutResult<SweepCounts> {
  /** With a journal: the last pending opt-out row id, all of whose rows went to onChecked; null when none. */
  journalUpTo: number | null;
}

function isSweptOptout(value: unknown): value is SweptRawUid {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  const entry = v.entry as Record<string, unknown> | null | undefined;
  const verdict = v.verdict as Record<string, unknown> | null | undefined;
  return (
    typeof entry === 'object' &&
    entry !== null &&
    typeof entry.id === 'number' &&
    (entry.type === 'email' || entry.type === 'phone') &&
    typeof entry.hash === 'string' &&
    (v.which === 'u' || v.which === 'p') &&
    typeof v.rawUid === 'string' &&
    typeof verdict === 'object' &&
    verdict !== null &&
    verdict.kind === 'opted_out' &&
    typeof verdict.sinceMs === 'number'
  );
}

/**
 * Writes the opted-out rows that earlier sweeps saved (tombstoned) but whose output was never committed through
 * `onRows`, before this run's own; returns how many.
 */
export async function replaySweepOptouts(
  journal: ChangeJournal,
  channel: ChangeChannel,
  onRows: (rows: SweptRawUid[]) => void | Promise<void>,
): Promise<number> {
  return replayPendingChanges(journal, channel, (rows: PendingChange[]) =>
    onRows(rows.map((r) => parseJournalRow(r, isSweptOptout, 'opt-out'))),
  );
}

/** Entries read from the state per page; a page fills one or two requests. */
const SWEEP_PAGE = 2_500;

interface SweepBatch {
  entries: OptoutCandidate[];
}

/**
 * optout-check --state: sends the stored raw UIDs and previous raw UIDs of the entries after the sweep's saved
 * cursor in id order, wrapping to the first entry at the end of the table, so that successive runs check every
 * entry once per cycle, the one checked longest ago first. It tombstones the entries whose u or p opted out, and
 * records the check time of every entry that was answered, moving the cursor with it. A failed batch records
 * nothing and holds the cursor where it was for the rest of the run, so its entries come first in the next run.
 */
export async function sweepStateOptouts(options: SweepOptions): Promise<SweepResult> {
  const { state, nowS } = options;
  const withRawUid = await state.countWithRawUid();
  // a fraction of them: ceil(fraction * all), at most all; none for a fraction that is not above 0
  const fraction = options.fraction;
  const planned =
    fraction === undefined
      ? withRawUid
      : fraction > 0
        ? Math.min(withRawUid, Math.ceil(Math.min(fraction, 1) * withRawUid))
        : 0;
  const counts: SweepCounts = { ...emptyCounts(), planned, entries: 0, tombstoned: 0 };
  const checker = new OrderedChecker<SweepBatch>(options, counts);
  const limit = batchLimit(options);
  const start = (await state.sweepCursor()).id;

  async function* batches(): AsyncGenerator<CheckBatch<SweepBatch>> {
    let taken = 0;
    let entries: OptoutCandidate[] = [];
    let rawUids = new Set<string>();
    const seal = (): CheckBatch<SweepBatch> => {
      const batch = { rawUids: [...rawUids], payload: { entries } };
      entries = [];
      rawUids = new Set();
      return batch;
    };
    // after the cursor to the end of the table, then from the first entry up to the cursor: two disjoint ranges
    // of ids, so no entry comes round twice in one run
    for (const [after, upTo] of [
      [start, undefined],
      [0, start],
    ] as const) {
      let cursor: OptoutCursor = { id: after };
      while (taken < planned) {
        const want = Math.min(SWEEP_PAGE, planned - taken);
        const page = await state.selectForOptoutCheck(want, cursor, upTo);
        for (const entry of page) {
          taken++;
          if (options.share !== undefined && !options.share(entry)) continue;
          const ids = [entry.u, entry.p].filter((id): id is string => id !== null && !rawUids.has(id));
          if (rawUids.size + ids.length > limit) yield seal();
          entries.push(entry);
          for (const id of [entry.u, entry.p]) if (id !== null) rawUids.add(id);
        }
        if (page.length < want) break;
        cursor = page[page.length - 1];
      }
    }
    if (entries.length > 0) yield seal();
  }

  // the cursor follows committed checks only while every batch before them was answered
  let cursorHeld = false;
  const outcome = await checker.run(batches(), async (batch, answer) => {
    const rows: SweptRawUid[] = [];
    const optedOut: OptedOutRawUid[] = [];
    const journalRows: string[] = [];
    for (const entry of batch.payload.entries) {
      for (const which of ['u', 'p'] as const) {
        const rawUid = entry[which];
        if (rawUid === null) continue;
        const verdict = verdictOf(rawUid, answer);
        countVerdict(counts, verdict);
        const row: SweptRawUid = { entry, which, rawUid, verdict };
        if (verdict.kind === 'opted_out') {
          optedOut.push({ rawUid, optedOutSinceMs: verdict.sinceMs });
          if (options.journal !== undefined) journalRows.push(JSON.stringify(row));
        }
        rows.push(row);
      }
    }
    counts.rows += rows.length;
    if (answer.ok) {
      const ids = batch.payload.entries.map((e) => e.id);
      const journal =
        options.journal !== undefined && journalRows.length > 0
          ? { runId: options.journal.runId, channel: options.journal.channel, rows: journalRows }
          : undefined;
      if (optedOut.length > 0) counts.tombstoned += await state.tombstoneByRawUid(optedOut, nowS, ids, journal);
      const last = ids.at(-1);
      await state.recordOptoutChecks(ids, nowS, cursorHeld || last === undefined ? undefined : { id: last });
      counts.entries += ids.length;
    } else {
      cursorHeld = true;
    }
    if (options.onChecked) await options.onChecked(rows);
  });
  // batches are saved only inside settle, which run() has awaited: every pending row up to here went to onChecked
  const journal = options.journal;
  const journalUpTo = journal === undefined ? null : await journal.state.lastPendingChangeId(journal.channel);
  return { outcome, counts, batchErrors: checker.lifecycle.batchErrors, journalUpTo };
}
