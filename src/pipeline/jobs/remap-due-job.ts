/** A whole remap-due run: the state file opened, what is due re-mapped, the changes file written. */
import { shareOf } from './remap-share.js';
import { openState } from '../../state/index.js';
import {
  changesColumns,
  type RemapChange,
  changeCells,
  RemapEngine,
  type RemapResult,
  replayRemapChanges,
} from '../remap/remap-engine.js';
import { runBatchCommand, type BatchPlan } from '../run/batch-run.js';
import { chooseConcurrency, type ServiceTarget } from '../run/connection.js';
import { EXIT, UserError } from '../run/exit-codes.js';
import { sayTo, type RunDeps } from '../run/run-deps.js';
import { remapRunArgs } from '../run/run-report.js';
import { formatCount } from '../run/summary.js';
import { planRemapDueV2 } from './remap-due-v2.js';
import {
  finish,
  isoOf,
  nextDue,
  nothingDueLine,
  remapReporting,
  remapSummary,
  writeDryRunSummary,
  type NextDue,
  type RemapDueOptions,
  type RemapDueRun,
} from './remap-report.js';

const DRY_RUN_DAYS = 7;

/** `remap-due`: returns the exit code (0, 3 some batches failed, 130 interrupted); throws for the rest. */
export function runRemapDueJob(
  options: RemapDueOptions,
  target: ServiceTarget,
  deps: RunDeps,
  startedMs: number,
): Promise<number> {
  const say = sayTo(options.output, deps);
  return runBatchCommand(
    {
      openState: () =>
        openState(options.state, { envFingerprint: target.envFingerprint, create: false, readonly: options.dryRun }),
      plan: async (state) => {
        const run: RemapDueRun = { state, nowS: options.nowS, options, startedMs, deps, say };
        // a v2 file is kept fresh by salt bucket rotation, not by r
        if (state.meta().api === 'v2') return planRemapDueV2(run, target);
        if (options.upgrade === true)
          throw new UserError(
            `--upgrade moves the entries of a v2 state file to v3; ${options.state} is a v3 state file already`,
          );
        if (options.dryRun) return await dryRun(run);
        // a second run at the same time would send the same entries twice and race on the commits
        await state.waitForLock((options.wait ?? 0) * 1000);
        return remapPlan(run, target);
      },
    },
    deps,
  );
}

async function dryRun(run: RemapDueRun): Promise<number> {
  const { state, nowS, options, deps } = run;
  const dueNow = state.countDue(nowS);
  // day 0 is what is due now; days 1..7 are what comes due after it
  const byDay = state.dueByDay(nowS, DRY_RUN_DAYS + 1).slice(1);
  const willSend = options.limit === undefined ? dueNow : Math.min(dueNow, options.limit);
  const requests = Math.ceil(willSend / 5000);
  if (!options.output.quiet) {
    const lines = [
      `remap-due --dry-run at ${isoOf(nowS)}: nothing was sent`,
      `  ${formatCount(dueNow)} entries due now (r <= now)${options.limit !== undefined && options.limit < dueNow ? `; --limit takes ${formatCount(willSend)}` : ''}: ${formatCount(requests)} request(s) of up to 5,000`,
      `  coming due:`,
      ...byDay.map((d) => `    ${d.day}  ${formatCount(d.count)}`),
    ];
    deps.stderr.write(`${lines.join('\n')}\n`);
  }
  await writeDryRunSummary(run, {
    dry_run: true,
    now_s: nowS,
    entries: 0,
    due_now: dueNow,
    would_send: willSend,
    requests_needed: requests,
    due_by_day: byDay,
  });
  return EXIT.ok;
}

/** Re-maps what is due by r, with v3. */
function remapPlan(run: RemapDueRun, target: ServiceTarget): BatchPlan<RemapResult> {
  const { state, nowS, options, startedMs, deps, say } = run;
  const concurrency = chooseConcurrency(options.concurrency, target, say);
  const due = state.countDue(nowS);
  const cellsOf = (change: RemapChange): string[] =>
    changeCells(change, options.output.timeFormat, options.output.hashEncoding);
  let next: NextDue | null | undefined;
  return {
    command: 'remap-due',
    target,
    connection: { kind: 'map', concurrency },
    record: { args: remapRunArgs(options), startS: nowS, endS: () => nowS },
    output: {
      columns: changesColumns(options.output.timeFormat, false),
      options: options.output,
      progressLabel: 'remap-due',
      cron: true,
    },
    total: () => (options.limit === undefined ? due : Math.min(due, options.limit)),
    replay: (sink) => replayRemapChanges(state, (changes) => sink.writeRows(changes.map(cellsOf))),
    engine: ({ client, limiter, sink, progress, runId }) =>
      new RemapEngine({
        state,
        nowS,
        journal: { runId, state },
        mapBatch: (request, signal) => client.mapV3(request, { signal }),
        limiter,
        ...(options.limit !== undefined ? { limit: options.limit } : {}),
        ...(deps.signal !== undefined ? { signal: deps.signal } : {}),
        ...remapReporting(sink, progress, client, cellsOf),
        ...shareOf(options.shard),
      }).run(),
    summary: (result, { client, replayed }) => {
      const summary = remapSummary(result, client, nowS, due, startedMs, deps.now());
      if (replayed > 0) summary.replayed_changes = replayed;
      // nothing was due: say when something will be, rather than a bare "0 entries"
      next = due === 0 ? nextDue(state, nowS) : undefined;
      if (next !== undefined) summary.next_due = next;
      return summary;
    },
    finish: async (result, summary, { sink, replayed }) => {
      const code = await finish(result, summary, sink, options, deps, say, {
        state,
        kind: 'remap',
        replayed,
        upTo: result.journalUpTo,
      });
      if (next !== undefined) say(nothingDueLine(next, nowS));
      return code;
    },
  };
}
