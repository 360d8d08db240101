/** What remap-due (by r, by salt bucket) and migrate share: the options, the run's start, its changes and its ending. */
import type { StateStore } from '../../state/index.js';
import type { DueDay } from '../../state/types.js';
import { changeChannel, type ChangeChannel } from '../run/change-journal.js';
import type { RemapState } from '../remap/remap-engine.js';
import type { ChangeJournal } from '../run/change-journal.js';
import type { Shard } from '../shard/shard-spec.js';
import type { TableSink } from '../io/table.js';
import { shareOf } from './remap-share.js';
import { strandedChangeLines } from '../run/stranded-changes.js';
import {
  changeCells,
  changeCellsV2,
  changesColumns,
  replayRemapChanges,
  type RemapBatchFn,
  type RemapChange,
  type RemapCounts,
  type RemapJournal,
  type RemapResult,
} from '../remap/remap-engine.js';
import type { EngineRun } from '../run/batch-run.js';
import { chooseConcurrency, type ServiceClient, type ServiceTarget } from '../run/connection.js';
import { EXIT, UserError } from '../run/exit-codes.js';
import type { OutputFlags } from '../run/output-options.js';
import type { RunDeps, Say } from '../run/run-deps.js';
import { KNOWN_FAILURES, reportRun, requestCounters, type ChangeDelivery } from '../run/run-report.js';
import {
  formatCount,
  formatDuration,
  formatRate,
  makeSummary,
  writeSummaryJson,
  type RunSummary,
} from '../run/summary.js';

/** What a remap-due run is asked to do, checked: the state file, the time it plans against, its limits. */
export interface RemapDueOptions {
  /** The state file made by map --state. */
  state: string;
  /** --now as given (ISO 8601 or Unix seconds), for the runs table. */
  now?: string | undefined;
  /** The run's now (--now or the clock), Unix seconds. */
  nowS: number;
  dryRun: boolean;
  limit?: number | undefined;
  concurrency?: number | undefined;
  /** v2 state: re-map the entries of rotated buckets with v3, which turns them into v3 entries. */
  upgrade?: boolean | undefined;
  /** --wait: seconds to wait for another run's lock on the state file (absent: fail at once). */
  wait?: number | undefined;
  /** --shard K/N: re-map only the due entries whose key falls to this runner. */
  shard?: Shard | undefined;
  output: OutputFlags;
}

/** What a v3 remap-due run needs of its state: a file's answers come at once, a database's as promises. */
export type RemapDueState = RemapState &
  ChangeJournal & {
    countDue(nowS: number): number | Promise<number>;
    dueByDay(nowS: number, days: number): DueDay[] | Promise<DueDay[]>;
    lastPendingChangeId(channel: ChangeChannel): number | null | Promise<number | null>;
    pendingChangeCounts(): Record<string, number> | Promise<Record<string, number>>;
  };

/** One remap-due run, once its state is open: what each of its steps needs (a v2 run's state is a file). */
export interface RemapDueRun<S = StateStore> {
  state: S;
  /** The run's now (--now or the clock), Unix seconds. */
  nowS: number;
  options: RemapDueOptions;
  startedMs: number;
  deps: RunDeps;
  say: Say;
}

/** --summary-json of a dry run: nothing was sent; `extra` holds what was counted. */
export async function writeDryRunSummary(
  { options, startedMs, deps }: Pick<RemapDueRun<unknown>, 'options' | 'startedMs' | 'deps'>,
  extra: Record<string, unknown>,
): Promise<void> {
  if (options.output.summaryJson === undefined) return;
  await writeSummaryJson(
    options.output.summaryJson,
    makeSummary({ command: 'remap-due', rows: 0, startedMs, endedMs: deps.now(), extra }),
  );
}

/** How far ahead a run with nothing due counts day by day: r is at most about a year after a mapping. */
const NEXT_DUE_HORIZON_DAYS = 400;
const DAY_S = 86_400;

/** When the next entries come due, for a run that found none due: the first UTC day with any, and how many. */
export interface NextDue {
  /** YYYY-MM-DD (UTC): r falls on its 00:00. */
  day: string;
  count: number;
}

/** The latest time --now takes: every r is before it. */
const END_OF_TIME_S = Date.UTC(9999, 11, 31) / 1000;

/**
 * For a run with nothing due (no r <= nowS): the first day with entries, and how many come due on it. Usually
 * within the next year (r is at most about a year after the mapping); an entry further away (a --now before the
 * time the entries were mapped, a service whose clock was ahead) is found through the due lists, which are in
 * day order: the first entry of a walk from now is on the earliest day. Null only when no entry has an r.
 */
export function nextDue(state: Pick<StateStore, 'dueByDay' | 'selectDue' | 'countDue'>, nowS: number): NextDue | null {
  const days = state.dueByDay(nowS, NEXT_DUE_HORIZON_DAYS + 1).slice(1);
  const first = days.find((d) => d.count > 0);
  if (first !== undefined) return { day: first.day, count: first.count };
  const [earliest] = state.selectDue(END_OF_TIME_S, { r: nowS, id: 0 }, 1);
  if (earliest === undefined || earliest.r === null) return null;
  const dayStart = Math.floor(earliest.r / DAY_S) * DAY_S;
  // nothing is due at nowS, so what is due by the end of that day is that day's
  return { day: isoOf(dayStart).slice(0, 10), count: state.countDue(dayStart + DAY_S - 1) };
}

/**
 * nextDue of a state that may answer with promises. A database walks its due entries in id order, not by r, so
 * it names the day itself (firstDueDay).
 */
export async function nextDueOf(
  state: Pick<RemapDueState, 'dueByDay' | 'selectDue' | 'countDue'> & {
    firstDueDay?(afterS: number): Promise<number | null>;
  },
  nowS: number,
): Promise<NextDue | null> {
  const days = (await state.dueByDay(nowS, NEXT_DUE_HORIZON_DAYS + 1)).slice(1);
  const first = days.find((d) => d.count > 0);
  if (first !== undefined) return { day: first.day, count: first.count };
  let dayStart: number | null;
  if (state.firstDueDay !== undefined) dayStart = await state.firstDueDay(nowS);
  else {
    const r = (await state.selectDue(END_OF_TIME_S, { r: nowS, id: 0 }, 1))[0]?.r ?? null;
    dayStart = r === null ? null : Math.floor(r / DAY_S) * DAY_S;
  }
  if (dayStart === null) return null;
  return { day: isoOf(dayStart).slice(0, 10), count: await state.countDue(dayStart + DAY_S - 1) };
}

/**
 * The line for a run that found nothing due: when the next entries come due, and how to plan against another
 * time. A local service's simulated days (POST /_local/clock) do not move this command's own now, so --now it is.
 */
export function nothingDueLine(next: NextDue | null, nowS: number): string {
  const at = `nothing was due at ${isoOf(nowS)}`;
  if (next === null) return `${at}, and nothing ever comes due: the state file has no entry with a refresh time`;
  return (
    `${at}: the next ${formatCount(next.count)} ${next.count === 1 ? 'entry comes' : 'entries come'} due on ${next.day} (00:00 UTC); ` +
    `run then, or plan against that time with --now ${next.day}T00:30:00Z`
  );
}

export function isoOf(seconds: number): string {
  return new Date(seconds * 1000).toISOString().replace('.000Z', 'Z');
}

export function remapSummary(
  result: RemapResult,
  client: ServiceClient,
  nowS: number,
  due: number,
  startedMs: number,
  endedMs: number,
): RunSummary {
  const c = result.counts;
  return makeSummary({
    command: 'remap-due',
    rows: c.selected,
    status: c.status,
    ...requestCounters(client.stats),
    startedMs,
    endedMs,
    extra: {
      outcome: result.outcome.kind,
      now_s: nowS,
      due,
      entries: c.selected,
      changed: c.changed,
      unchanged: c.unchanged,
      change_rows: c.changeRows,
      batches: c.batches,
      batches_failed: c.batchesFailed,
      batches_committed: c.batchesCommitted,
      ...(c.stillDue > 0 ? { still_due: c.stillDue } : {}),
    },
  });
}

/** `remap-due: 14,000 entries in 3.1 s (4,516/s): 13,990 mapped (1,201 changed), 6 optout, 4 invalid, 0 error; 3 requests, 0 retries, 0 x 429` */
export function formatRemapSummary(s: RunSummary): string {
  const st = s.status;
  const changed = typeof s.changed === 'number' ? s.changed : 0;
  return (
    `remap-due: ${formatCount(s.rows)} entries in ${formatDuration(s.duration_s)} (${formatRate(s.rows_per_s)}/s): ` +
    `${formatCount(st.mapped)} mapped (${formatCount(changed)} changed), ${formatCount(st.optout)} optout, ` +
    `${formatCount(st.invalid)} invalid, ${formatCount(st.error)} error; ` +
    `${formatCount(s.requests)} requests, ${formatCount(s.retries)} retries, ${formatCount(s.http_429)} x 429`
  );
}

/**
 * Only a completed run writes its changes file, and the pending changes it holds are delivered with its rename, so
 * no later run writes them again. A run that stopped (interrupted or failed) writes none: the changes of its
 * committed batches, and any an earlier run left, wait in the state file and come first in the next completed run's.
 */
export async function finish(
  result: RemapResult,
  summary: RunSummary,
  sink: TableSink,
  options: RemapDueOptions,
  deps: RunDeps,
  say: Say,
  delivery: ChangeDelivery,
): Promise<number> {
  const { outcome, counts } = result;
  const keep = outcome.kind === 'completed';
  await reportRun(sink, keep, formatRemapSummary(summary), summary, options.output, deps, [], { ...delivery, say });
  if (counts.stillDue > 0) {
    say(
      `${formatCount(counts.stillDue)} entries came back with an r that is not after --now: the service's clock is behind it; they are due again next run`,
    );
  }
  const pending = counts.batchesCommitted > 0 || delivery.replayed > 0;
  const output = options.output.output;
  const fate = pending
    ? ` (their changes wait in the state file for the next completed run${output !== undefined && output !== '-' ? `: ${output} was not written` : ''})`
    : '';
  switch (outcome.kind) {
    case 'completed':
      if (counts.status.error === 0) return EXIT.ok;
      say(
        `${formatCount(counts.status.error)} entries were not remapped (${result.batchErrors.join('; ')}); they stay due: the next run retries them`,
      );
      return EXIT.partial;
    case 'interrupted':
      say(
        `interrupted: ${formatCount(counts.batchesCommitted)} answered batch(es) are saved${fate}; ` +
          're-run the same command to remap the rest',
      );
      return EXIT.interrupted;
    case 'auth-refused':
      throw outcome.error;
    case 'failed': {
      const saved =
        counts.batchesCommitted > 0
          ? `; ${formatCount(counts.batchesCommitted)} answered batch(es) are saved${fate}`
          : '';
      if (!KNOWN_FAILURES.has(outcome.error.name)) throw outcome.error;
      throw new UserError(`${outcome.error.message}${saved}; re-run to remap the rest`, EXIT.failed);
    }
  }
}

/**
 * How a remap-due run starts, on a v3 or a v2 state: a runner delivers its own share's changes only (runners at once
 * never write or acknowledge each other's), so it says which changes are left for other shares; then its concurrency.
 */
export async function remapStart(
  run: RemapDueRun<Pick<RemapDueState, 'pendingChangeCounts'>>,
  target: ServiceTarget,
): Promise<{ channel: ChangeChannel; concurrency: number }> {
  const { options, say } = run;
  const channel = changeChannel('remap', options.shard);
  for (const line of strandedChangeLines(await run.state.pendingChangeCounts(), channel)) say(line);
  return { channel, concurrency: chooseConcurrency(options.concurrency, target, say) };
}

/**
 * What remap-due (v3 by r, v2 by salt bucket) and migrate plan alike: the changes output (v2 columns for a v2 state
 * file), the replay of the changes an earlier run left pending, the engine's wiring (its state and journal, v3
 * requests, the limit, the share, the reporting to the output and progress) and the delivery of the changes the
 * output holds.
 */
export function changesRun<S extends ChangeJournal & RemapJournal['state']>(
  state: S,
  options: { output: OutputFlags; limit?: number | undefined; shard?: Shard | undefined },
  channel: ChangeChannel,
  run: { nowS: number; signal: AbortSignal | undefined; progressLabel: string; cron: boolean; v2?: boolean },
) {
  const { output } = options;
  const v2 = run.v2 === true;
  const cellsOf = (change: RemapChange): string[] =>
    v2
      ? changeCellsV2(change, output.timeFormat, output.hashEncoding)
      : changeCells(change, output.timeFormat, output.hashEncoding);
  return {
    output: {
      columns: changesColumns(output.timeFormat, v2),
      options: output,
      progressLabel: run.progressLabel,
      cron: run.cron,
    },
    replay: (sink: TableSink) => replayRemapChanges(state, channel, (changes) => sink.writeRows(changes.map(cellsOf))),
    /**
     * The changed entries go to the output, each settled batch to the progress, after `doneBefore` entries that
     * an earlier pass of the same run settled.
     */
    wiring: ({ client, limiter, sink, progress, runId }: EngineRun, doneBefore: () => number = () => 0) => {
      const mapBatch: RemapBatchFn = (request, signal) => client.mapV3(request, { signal });
      const onProgress = (c: Readonly<RemapCounts>): void => {
        const s = c.status;
        progress.update({
          done: doneBefore() + s.mapped + s.optout + s.invalid + s.error,
          retries: client.stats.retries,
          http429: client.stats.http429,
        });
      };
      return {
        state,
        nowS: run.nowS,
        journal: { runId, channel, state },
        mapBatch,
        limiter,
        ...(options.limit !== undefined ? { limit: options.limit } : {}),
        ...(run.signal !== undefined ? { signal: run.signal } : {}),
        onChanges: (changes: RemapChange[]) => sink.writeRows(changes.map(cellsOf)),
        onProgress,
        ...shareOf(options.shard),
      };
    },
    /** The changes the output holds, delivered with its rename: those replayed, and the journal up to `upTo`. */
    delivery: (replayed: number, upTo: number | null): ChangeDelivery => ({
      state,
      channel,
      replayed,
      upTo,
    }),
  };
}
