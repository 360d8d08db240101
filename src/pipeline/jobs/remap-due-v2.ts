/** remap-due on a state file made by map --api v2: salt buckets mark what is due, then v2 (or v3) re-maps it. */
import { RemapEngine, type RemapCounts, type RemapResult } from '../remap/remap-engine.js';
import type { BatchPlan } from '../run/batch-run.js';
import type { ServiceTarget } from '../run/connection.js';
import { EXIT, UserError } from '../run/exit-codes.js';
import { remapRunArgs } from '../run/run-report.js';
import { formatCount } from '../run/summary.js';
import { v2DeprecationWarning } from '../v2/v2-notice.js';
import { checkRotatedBuckets, isoUtc, nextCheckSinceMs, type BucketCheck } from '../v2/rotated-buckets.js';
import { mapBatchV2 } from '../v2/map-v2.js';
import { migrationInProgress } from '../v2/migration.js';
import {
  changesRun,
  finish,
  isoOf,
  remapStart,
  remapSummary,
  writeDryRunSummary,
  type RemapDueRun,
} from './remap-report.js';

/**
 * `remap-due` on a state file made by `map --api v2`: a v2 raw UID is stale once its salt bucket rotated after it
 * was mapped (docs/wire-protocol.md §5.5). So the run first asks which buckets rotated since its last check (the first
 * time: since the oldest mapping), marks those entries due and records the check; then it re-maps exactly the
 * entries marked due, with v2, or with v3 under --upgrade (they become v3 entries with r). Entries an earlier
 * --upgrade moved to v3 are due by r, and are re-mapped with v3 in the same run.
 */
export async function planRemapDueV2(
  run: RemapDueRun,
  target: ServiceTarget,
): Promise<BatchPlan<RemapResult> | number> {
  const { state, options, startedMs, deps } = run;
  const path = options.state;
  if (migrationInProgress(state)) {
    throw new UserError(
      `${path} is being migrated to v3: finish with uid2-batch migrate --state ${path} (remap-due would re-map with v2 what the migration has marked)`,
    );
  }
  deps.stderr.write(
    v2DeprecationWarning(
      `remap-due on a v2 state file (POST /v2/identity/buckets${options.upgrade === true ? '' : ' and /v2/identity/map'})`,
      `convert the file with uid2-batch migrate --state ${path}; remap-due then re-maps by refresh time with v3`,
      startedMs,
    ),
  );
  if (options.dryRun) return dryRunV2(run);
  // a second run at the same time would send the same entries twice and race on the commits
  await state.waitForLock((options.wait ?? 0) * 1000);
  return remapV2Plan(run, target);
}

async function dryRunV2(run: RemapDueRun): Promise<number> {
  const { state, nowS, options, deps } = run;
  const marked = state.countDueV2();
  const dueByR = state.countDue(nowS);
  const since = nextCheckSinceMs(state);
  if (!options.output.quiet) {
    const lines = [
      `remap-due --dry-run on a v2 state file at ${isoOf(nowS)}: nothing was sent`,
      `  ${formatCount(marked)} entries marked due (their salt bucket rotated after they were mapped)`,
      ...(dueByR > 0
        ? [`  ${formatCount(dueByR)} entries moved to v3 earlier (--upgrade) are due by refresh time`]
        : []),
      since === null
        ? '  no v2 entries to check buckets for'
        : `  a real run first asks for the buckets rotated since ${isoUtc(since)} and may mark more (a dry run does not ask)`,
    ];
    deps.stderr.write(`${lines.join('\n')}\n`);
  }
  await writeDryRunSummary(run, {
    dry_run: true,
    api: 'v2',
    now_s: nowS,
    due_now: marked + dueByR,
    marked_due: marked,
    due_by_r: dueByR,
    ...(since !== null ? { buckets_since: isoUtc(since) } : {}),
  });
  return EXIT.ok;
}

/** Asks which buckets rotated, marks their entries due, then re-maps what is marked (v2, or v3) and what is due by r. */
async function remapV2Plan(run: RemapDueRun, target: ServiceTarget): Promise<BatchPlan<RemapResult>> {
  const { state, nowS, options, startedMs, deps, say } = run;
  const { channel, concurrency } = await remapStart(run, target);
  const changes = changesRun(state, options, channel, {
    nowS,
    signal: deps.signal,
    progressLabel: 'remap-due',
    cron: true,
    v2: true,
  });
  let check: BucketCheck | null = null;
  let dueByR = 0;
  let due = 0;
  let byBucket = 0;
  return {
    command: 'remap-due',
    target,
    connection: { kind: 'map', concurrency },
    record: {
      args: { api: 'v2', ...(options.upgrade === true ? { upgrade: true } : {}), ...remapRunArgs(options) },
      startS: nowS,
      endS: () => nowS,
    },
    beforeOutput: async (client) => {
      const since = nextCheckSinceMs(state);
      if (since !== null) {
        check = await checkRotatedBuckets({
          client,
          state,
          sinceMs: since,
          checkedAtMs: nowS * 1000,
          ...(deps.signal !== undefined ? { signal: deps.signal } : {}),
        });
      }
      dueByR = state.countDue(nowS);
      due = state.countDueV2() + dueByR;
    },
    output: changes.output,
    total: () => (options.limit === undefined ? due : Math.min(due, options.limit)),
    replay: changes.replay,
    engine: async (engineRun) => {
      // the entries marked due first (v2 requests, or v3 under --upgrade), then those an earlier --upgrade moved
      // to v3 that are due by r, within what is left of --limit
      const byV3 = changes.wiring(engineRun, () => byBucket);
      let result = await new RemapEngine({
        ...byV3,
        selectPage: (after, limit) => state.selectDueV2(after?.id ?? null, limit),
        ...(options.upgrade === true ? {} : { mapBatch: mapBatchV2(engineRun.client) }),
      }).run();
      byBucket = result.counts.selected;
      const left = options.limit === undefined ? Number.POSITIVE_INFINITY : options.limit - byBucket;
      if (result.outcome.kind === 'completed' && dueByR > 0 && left > 0) {
        const byR = await new RemapEngine({ ...byV3, ...(Number.isFinite(left) ? { limit: left } : {}) }).run();
        result = joinResults(result, byR);
      }
      return result;
    },
    summary: (result, { client, replayed }) => {
      const summary = remapSummary(result, client, nowS, due, startedMs, deps.now());
      summary.api = 'v2';
      if (check !== null) {
        summary.buckets_since = isoUtc(check.sinceMs);
        summary.buckets_rotated = check.buckets.length;
        summary.marked_due = check.marked;
      }
      if (options.upgrade === true) summary.upgraded = byBucket;
      if (replayed > 0) summary.replayed_changes = replayed;
      return summary;
    },
    finish: (result, summary, { sink, replayed }) => {
      if (check !== null) {
        say(
          `buckets: ${formatCount(check.buckets.length)} salt bucket(s) rotated since ${isoUtc(check.sinceMs)}; ${formatCount(check.marked)} entries marked due`,
        );
      }
      return finish(result, summary, sink, options, deps, say, changes.delivery(replayed, result.journalUpTo));
    },
  };
}

/** The two passes of one run (by bucket, then by r) as one result. */
function joinResults(a: RemapResult, b: RemapResult): RemapResult {
  const x = a.counts;
  const y = b.counts;
  const counts: RemapCounts = {
    selected: x.selected + y.selected,
    status: {
      mapped: x.status.mapped + y.status.mapped,
      optout: x.status.optout + y.status.optout,
      invalid: x.status.invalid + y.status.invalid,
      error: x.status.error + y.status.error,
    },
    changed: x.changed + y.changed,
    unchanged: x.unchanged + y.unchanged,
    stillDue: x.stillDue + y.stillDue,
    changeRows: x.changeRows + y.changeRows,
    batches: x.batches + y.batches,
    batchesFailed: x.batchesFailed + y.batchesFailed,
    batchesCommitted: x.batchesCommitted + y.batchesCommitted,
  };
  // b ran last: its id covers a's rows too
  return {
    outcome: b.outcome,
    counts,
    batchErrors: [...new Set([...a.batchErrors, ...b.batchErrors])].slice(0, 5),
    journalUpTo: b.journalUpTo ?? a.journalUpTo,
  };
}
