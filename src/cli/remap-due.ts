import type { Command } from 'commander';
import type { ServiceClient } from '../client/index.js';
import { envFingerprint, type ConnectionFlags, type ResolvedConfig } from '../config/index.js';
import { CHANGES_HEADER, changeCells, RemapEngine, replayRemapChanges, type RemapResult } from '../pipeline/remap.js';
import type { TableSink } from '../pipeline/table.js';
import { parseInstantMs } from '../service/index.js';
import { openState } from '../state/index.js';
import type { StateStore } from '../state/types.js';
import { chooseConcurrency, connectForMapping, PUBLIC_MAX_CONCURRENCY, resolveFor, runInProcess, sayTo, type CommandDeps, type Say } from './command-context.js';
import { EXIT, UserError } from './exit-codes.js';
import { addConnectionOptions, addOutputOptions, connectionFlags, optionReaders, outputFlags, wholeNumber, type OutputFlags } from './options.js';
import { runRemapDueV2 } from './remap-due-v2.js';
import {
  acknowledgeDelivered,
  exitCodeOf,
  KNOWN_FAILURES,
  remapReporting,
  remapRunArgs,
  replayedLine,
  reportRun,
  requestCounters,
  withRunOutput,
  type ChangeDelivery,
} from './run-report.js';
import { formatCount, formatDuration, formatRate, makeSummary, writeSummaryJson, type RunSummary } from './summary.js';

export interface RemapDueFlags {
  state?: string;
  /** --now as given (ISO 8601 or Unix seconds). */
  now?: string;
  dryRun: boolean;
  limit?: number;
  concurrency?: number;
  /** v2 state: re-map the entries of rotated buckets with v3, which turns them into v3 entries. */
  upgrade?: boolean;
  connection: ConnectionFlags;
  output: OutputFlags;
}

/** What remap-due touches besides its files: injected, so tests run the command without a process. */
export type RemapDueDeps = CommandDeps;

/** One remap-due run, once its state file is open: what each of its steps needs. */
export interface RemapDueRun {
  state: StateStore;
  /** The run's now (--now or the clock), Unix seconds. */
  nowS: number;
  flags: RemapDueFlags;
  startedMs: number;
  deps: RemapDueDeps;
  say: Say;
}

const DRY_RUN_DAYS = 7;
const parseConcurrency = wholeNumber('--concurrency', 1, 200);
const parseLimit = wholeNumber('--limit', 1, Number.MAX_SAFE_INTEGER);

export function registerRemapDue(program: Command): void {
  const cmd = program
    .command('remap-due')
    .summary('re-map the entries of a state file whose refresh time has passed (nightly, from cron)')
    .description(
      [
        'Re-maps only the entries of the state file whose refresh time r has passed (r <= now), through the index on r: a run costs what is due (about 1/365 of the entries a day), not what is stored. Each answered batch is saved at once, so an interrupted run resumes by running it again.',
        'Writes a changes file: one row per entry whose raw UID changed, or that opted out (it is then tombstoned: hash kept, raw UIDs dropped, never sent again) or became invalid.',
        'r falls on a UTC midnight: schedule the job after 00:00 UTC, e.g. in a crontab: 30 0 * * * uid2-batch remap-due --state /data/s.db -o /data/changes-$(date -u +\\%F).csv',
        'Exit codes: 0 done; 3 some batches failed (their entries stay due for the next run); 2 usage, or another run is using the state file; 4 credentials refused; 130 interrupted.',
      ].join('\n\n'),
    )
    .option('--state <file>', 'the state file made by map --state (required)')
    .option('--now <time>', 'plan against this time instead of the clock: ISO 8601 (no zone means UTC) or Unix seconds')
    .option('--dry-run', 'count what is due now and on each of the next 7 days; send nothing')
    .option('--limit <n>', 'remap at most this many entries in this run (the most overdue first)', parseLimit)
    .option('--concurrency <n>', `requests in flight at most (default 20; at most ${PUBLIC_MAX_CONCURRENCY} against the public service)`, parseConcurrency)
    .option('--upgrade', 'v2 state file: re-map the entries of rotated buckets with v3 instead of v2 (they become v3 entries with a refresh time)');
  addConnectionOptions(cmd);
  addOutputOptions(cmd);
  cmd.action((opts: Record<string, unknown>) => runInProcess((deps) => runRemapDue(remapDueFlags(opts), deps)));
}

export function remapDueFlags(opts: Record<string, unknown>): RemapDueFlags {
  const { str, num } = optionReaders(opts);
  return {
    ...(str('state') !== undefined ? { state: str('state') } : {}),
    ...(str('now') !== undefined ? { now: str('now') } : {}),
    dryRun: opts.dryRun === true,
    ...(num('limit') !== undefined ? { limit: num('limit') } : {}),
    ...(num('concurrency') !== undefined ? { concurrency: num('concurrency') } : {}),
    ...(opts.upgrade === true ? { upgrade: true } : {}),
    connection: connectionFlags(opts),
    output: outputFlags(opts),
  };
}

/** --now: ISO 8601 or Unix seconds, to Unix seconds. */
export function parseNowS(text: string): number {
  const ms = parseInstantMs(text);
  if (ms === null || ms < 0 || ms > Date.UTC(9999, 11, 31)) {
    throw new UserError(`--now must be an ISO 8601 date-time (e.g. 2026-01-01T00:30:00Z; no zone means UTC) or Unix seconds (got '${text}')`);
  }
  return Math.floor(ms / 1000);
}

/** `uid2-batch remap-due`: returns the exit code (0, 3 some batches failed, 130 interrupted); throws for the rest. */
export async function runRemapDue(flags: RemapDueFlags, deps: RemapDueDeps): Promise<number> {
  const startedMs = deps.now();
  if (flags.state === undefined) throw new UserError('remap-due needs the state file: --state FILE (made by map --state FILE)');
  const nowS = flags.now !== undefined ? parseNowS(flags.now) : Math.floor(startedMs / 1000);
  const config = resolveFor(flags.connection, deps, { apiKey: !flags.dryRun, clientSecret: !flags.dryRun });
  const say = sayTo(flags.output, deps);
  const state = openState(flags.state, { envFingerprint: envFingerprint(config), create: false, readonly: flags.dryRun });
  const run: RemapDueRun = { state, nowS, flags, startedMs, deps, say };
  try {
    // a v2 file is kept fresh by salt bucket rotation, not by r
    if (state.meta().api === 'v2') return await runRemapDueV2(run, config);
    if (flags.upgrade === true) throw new UserError(`--upgrade moves the entries of a v2 state file to v3; ${flags.state} is a v3 state file already`);
    if (flags.dryRun) return await dryRun(run);
    // a second run at the same time would send the same entries twice and race on the commits
    state.lock();
    return await remapForReal(run, config);
  } finally {
    state.close();
  }
}

async function dryRun(run: RemapDueRun): Promise<number> {
  const { state, nowS, flags, deps } = run;
  const dueNow = state.countDue(nowS);
  // day 0 is what is due now; days 1..7 are what comes due after it
  const byDay = state.dueByDay(nowS, DRY_RUN_DAYS + 1).slice(1);
  const willSend = flags.limit === undefined ? dueNow : Math.min(dueNow, flags.limit);
  const requests = Math.ceil(willSend / 5000);
  if (!flags.output.quiet) {
    const lines = [
      `remap-due --dry-run at ${isoOf(nowS)}: nothing was sent`,
      `  ${formatCount(dueNow)} entries due now (r <= now)${flags.limit !== undefined && flags.limit < dueNow ? `; --limit takes ${formatCount(willSend)}` : ''}: ${formatCount(requests)} request(s) of up to 5,000`,
      `  coming due:`,
      ...byDay.map((d) => `    ${d.day}  ${formatCount(d.count)}`),
    ];
    deps.stderr.write(`${lines.join('\n')}\n`);
  }
  await writeDryRunSummary(run, { dry_run: true, now_s: nowS, entries: 0, due_now: dueNow, would_send: willSend, requests_needed: requests, due_by_day: byDay });
  return EXIT.ok;
}

/** --summary-json of a dry run: nothing was sent; `extra` holds what was counted. */
export async function writeDryRunSummary({ flags, startedMs, deps }: RemapDueRun, extra: Record<string, unknown>): Promise<void> {
  if (flags.output.summaryJson === undefined) return;
  await writeSummaryJson(flags.output.summaryJson, makeSummary({ command: 'remap-due', rows: 0, startedMs, endedMs: deps.now(), extra }));
}

export function isoOf(seconds: number): string {
  return new Date(seconds * 1000).toISOString().replace('.000Z', 'Z');
}

async function remapForReal(run: RemapDueRun, resolved: ResolvedConfig): Promise<number> {
  const { state, nowS, flags, startedMs, deps, say } = run;
  const concurrency = chooseConcurrency(flags.concurrency, resolved, say);
  const due = state.countDue(nowS);
  const total = flags.limit === undefined ? due : Math.min(due, flags.limit);
  const connection = await connectForMapping(resolved, concurrency);
  const { client, limiter } = connection;
  const runId = state.startRun('remap-due', JSON.stringify(remapRunArgs(flags)), nowS);
  try {
    return await withRunOutput(CHANGES_HEADER, 'remap-due', true, flags.output, deps, async (sink, progress) => {
      progress.update({ done: 0, total });
      const replayed = await replayRemapChanges(state, (changes) => sink.writeRows(changes.map(changeCells)));
      if (replayed > 0) say(replayedLine(replayed));
      const engine = new RemapEngine({
        state,
        nowS,
        journal: { runId, state },
        mapBatch: (request, signal) => client.mapV3(request, { signal }),
        limiter,
        ...(flags.limit !== undefined ? { limit: flags.limit } : {}),
        ...(deps.signal !== undefined ? { signal: deps.signal } : {}),
        ...remapReporting(sink, progress, client, changeCells),
      });
      const result = await engine.run();
      progress.stop();
      const summary = remapSummary(result, client, nowS, due, startedMs, deps.now());
      if (replayed > 0) summary.replayed_changes = replayed;
      state.finishRun(runId, JSON.stringify(summary), exitCodeOf(result), nowS);
      return await finish(result, summary, sink, flags, deps, say, { state, kind: 'remap', replayed, upTo: result.journalUpTo });
    });
  } finally {
    await connection.close();
  }
}

export function remapSummary(result: RemapResult, client: ServiceClient, nowS: number, due: number, startedMs: number, endedMs: number): RunSummary {
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
 * The changes file is written whenever a batch was committed, even when the run stopped: those entries are no
 * longer due, so no later run would report their changes again. Only a run that committed nothing and had no
 * earlier run's changes to write leaves an existing file alone. Once it is committed, the pending changes it
 * holds are acknowledged; until then they stay in the state file for the next run.
 */
export async function finish(
  result: RemapResult,
  summary: RunSummary,
  sink: TableSink,
  flags: RemapDueFlags,
  deps: RemapDueDeps,
  say: Say,
  delivery: ChangeDelivery,
): Promise<number> {
  const { outcome, counts } = result;
  const keep = outcome.kind === 'completed' || counts.batchesCommitted > 0 || delivery.replayed > 0;
  await reportRun(sink, keep, formatRemapSummary(summary), summary, flags.output, deps);
  // an interrupted or failed run keeps its rows pending: the cron line's re-run into the same -o FILE writes them again
  if (outcome.kind === 'completed') acknowledgeDelivered(delivery, say);
  if (counts.stillDue > 0) {
    say(`${formatCount(counts.stillDue)} entries came back with an r that is not after --now: the service's clock is behind it; they are due again next run`);
  }
  const output = flags.output.output;
  const where = output ?? 'stdout';
  switch (outcome.kind) {
    case 'completed':
      if (counts.status.error === 0) return EXIT.ok;
      say(`${formatCount(counts.status.error)} entries were not remapped (${result.batchErrors.join('; ')}); they stay due: the next run retries them`);
      return EXIT.partial;
    case 'interrupted':
      say(
        `interrupted: ${formatCount(counts.batchesCommitted)} answered batch(es) are saved${keep ? ` and their changes written to ${where}` : ''}; ` +
          're-run the same command to remap the rest',
      );
      return EXIT.interrupted;
    case 'auth-refused':
      throw outcome.error;
    case 'failed': {
      const saved = counts.batchesCommitted > 0 ? `; ${formatCount(counts.batchesCommitted)} answered batch(es) are saved and their changes written to ${where}` : '';
      if (!KNOWN_FAILURES.has(outcome.error.name)) throw outcome.error;
      throw new UserError(`${outcome.error.message}${saved}; re-run to remap the rest`, EXIT.failed);
    }
  }
}
