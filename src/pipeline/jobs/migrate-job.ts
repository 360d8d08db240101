/** A whole migrate run: every v2 entry of a state file re-mapped with v3, the changed raw UIDs written. */
import { openState } from '../../state/index.js';
import type { StateStore } from '../../state/index.js';
import { refuseDatabaseState } from './state-where.js';
import type { TableSink } from '../io/table.js';
import { runBatchCommand, type BatchPlan } from '../run/batch-run.js';
import { chooseConcurrency, type ServiceClient, type ServiceTarget } from '../run/connection.js';
import { EXIT, UserError } from '../run/exit-codes.js';
import type { OutputFlags } from '../run/output-options.js';
import { sayTo, type RunDeps, type Say } from '../run/run-deps.js';
import { KNOWN_FAILURES, remapRunArgs, reportRun, requestCounters, type ChangeDelivery } from '../run/run-report.js';
import { formatCount, formatDuration, makeSummary, type RunSummary } from '../run/summary.js';
import { changesRun } from './remap-report.js';
import { MIGRATION_FINISHED, migrateToV3, type MigrateResult } from '../v2/migration.js';

/** What a migrate run is asked to do, checked. */
export interface MigrateOptions {
  /** The v2 state file made by map --api v2 --state FILE. */
  state: string;
  dryRun: boolean;
  limit?: number | undefined;
  concurrency?: number | undefined;
  output: OutputFlags;
}

/** `migrate`: returns the exit code (0, 3 some batches failed, 130 interrupted); throws for the rest. */
export function runMigrateJob(
  options: MigrateOptions,
  target: ServiceTarget,
  deps: RunDeps,
  startedMs: number,
): Promise<number> {
  const say = sayTo(options.output, deps);
  return runBatchCommand(
    {
      openState: () => {
        refuseDatabaseState(options.state, 'migrate', 'a v2 state stays in a file, and a database state is v3 already');
        return openState(options.state, {
          envFingerprint: target.envFingerprint,
          create: false,
          readonly: options.dryRun,
        });
      },
      plan: (state) => {
        if (state.meta().api === 'v3') {
          const when = state.getMeta(MIGRATION_FINISHED);
          say(`${options.state} is a v3 state file${when !== null ? ` (migrated ${when})` : ''}: nothing to migrate`);
          return EXIT.ok;
        }
        if (options.dryRun) return dryRun(state, options, say);
        // a second run at the same time would send the same entries twice and race on the commits
        state.lock();
        return migratePlan(state, target, options, startedMs, deps, say);
      },
    },
    deps,
  );
}

function dryRun(state: StateStore, options: MigrateOptions, say: Say): number {
  const v2 = state.bucketEntries().count;
  const send = options.limit === undefined ? v2 : Math.min(v2, options.limit);
  say(
    `migrate --dry-run: nothing was sent; ${formatCount(v2)} v2 entries to re-map with v3${send < v2 ? ` (--limit takes ${formatCount(send)})` : ''}: ${formatCount(Math.ceil(send / 5000))} request(s) of up to 5,000`,
  );
  return EXIT.ok;
}

function migratePlan(
  state: StateStore,
  target: ServiceTarget,
  options: MigrateOptions,
  startedMs: number,
  deps: RunDeps,
  say: Say,
): BatchPlan<MigrateResult> {
  const nowS = Math.floor(startedMs / 1000);
  const concurrency = chooseConcurrency(options.concurrency, target, say);
  const changes = changesRun(state, options, 'remap', {
    nowS,
    signal: deps.signal,
    progressLabel: 'migrate',
    cron: false,
  });
  return {
    command: 'migrate',
    target,
    connection: { kind: 'map', concurrency },
    record: { args: remapRunArgs(options), startS: nowS, endS: () => Math.floor(deps.now() / 1000) },
    output: changes.output,
    total: () => {
      const v2 = state.bucketEntries().count;
      return options.limit === undefined ? v2 : Math.min(v2, options.limit);
    },
    replay: changes.replay,
    engine: (run) => migrateToV3(changes.wiring(run)),
    summary: (result, { client, replayed }) => {
      const summary = migrateSummary(result, client, startedMs, deps.now());
      if (replayed > 0) summary.replayed_changes = replayed;
      return summary;
    },
    finish: (result, summary, { sink, replayed }) =>
      finish(result, summary, sink, options, deps, say, changes.delivery(replayed, result.journalUpTo)),
  };
}

function migrateSummary(result: MigrateResult, client: ServiceClient, startedMs: number, endedMs: number): RunSummary {
  const c = result.counts;
  return makeSummary({
    command: 'migrate',
    rows: c.selected,
    status: c.status,
    ...requestCounters(client.stats),
    startedMs,
    endedMs,
    extra: {
      outcome: result.outcome.kind,
      entries: c.selected,
      same: c.unchanged,
      changed: c.changed,
      change_rows: c.changeRows,
      v2_before: result.v2Before,
      v2_left: result.v2Left,
      finished: result.finished,
      batches: c.batches,
      batches_failed: c.batchesFailed,
      batches_committed: c.batchesCommitted,
    },
  });
}

/** `migrate: 3,000 entries in 1.2 s: 2,990 mapped (2,981 raw UIDs the same, 9 changed), 6 optout, 4 invalid, 0 error; 1 request; 0 v2 entries left` */
function formatMigrateSummary(result: MigrateResult, summary: RunSummary): string {
  const c = result.counts;
  const s = c.status;
  return (
    `migrate: ${formatCount(c.selected)} entries in ${formatDuration(summary.duration_s)}: ${formatCount(s.mapped)} mapped ` +
    `(${formatCount(c.unchanged)} raw UIDs the same, ${formatCount(c.changed)} changed), ${formatCount(s.optout)} optout, ` +
    `${formatCount(s.invalid)} invalid, ${formatCount(s.error)} error; ${formatCount(summary.requests)} request${summary.requests === 1 ? '' : 's'}; ` +
    `${formatCount(result.v2Left)} v2 entries left`
  );
}

/**
 * Only a completed run writes its changes file, and the pending changes it holds are delivered with its rename. A
 * stopped run (interrupted or failed) writes none: its changes wait in the state file for the next completed run.
 */
async function finish(
  result: MigrateResult,
  summary: RunSummary,
  sink: TableSink,
  options: MigrateOptions,
  deps: RunDeps,
  say: Say,
  delivery: ChangeDelivery,
): Promise<number> {
  const { outcome, counts } = result;
  const keep = outcome.kind === 'completed';
  await reportRun(sink, keep, formatMigrateSummary(result, summary), summary, options.output, deps, [], {
    ...delivery,
    say,
  });
  const path = options.state as string;
  if (result.finished)
    say(
      `${path} is a v3 state file now: use uid2-batch map --state ${path} and uid2-batch remap-due --state ${path} (without --api v2)`,
    );
  const again = `run uid2-batch migrate --state ${path} again to continue`;
  const waiting =
    counts.batchesCommitted > 0 || delivery.replayed > 0
      ? ' (their changes wait in the state file for the next completed run)'
      : '';
  switch (outcome.kind) {
    case 'completed':
      if (counts.status.error > 0) {
        say(
          `${formatCount(counts.status.error)} entries were not re-mapped (${result.batchErrors.join('; ')}); they stay v2: ${again}`,
        );
        return EXIT.partial;
      }
      if (!result.finished) say(`${formatCount(result.v2Left)} v2 entries left (--limit): ${again}`);
      return EXIT.ok;
    case 'interrupted':
      say(`interrupted: ${formatCount(counts.batchesCommitted)} answered batch(es) are saved${waiting}; ${again}`);
      return EXIT.interrupted;
    case 'auth-refused':
      throw outcome.error;
    case 'failed': {
      if (!KNOWN_FAILURES.has(outcome.error.name)) throw outcome.error;
      throw new UserError(
        `${outcome.error.message}; ${formatCount(counts.batchesCommitted)} answered batch(es) are saved${waiting}: ${again}`,
        EXIT.failed,
      );
    }
  }
}
