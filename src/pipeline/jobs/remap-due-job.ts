/** A whole remap-due run: the state file opened, what is due re-mapped, the changes file written. */
import type { StateBackend } from '../../state/backend.js';
import { openState, type StateStore } from '../../state/index.js';
import { lockForSweep } from '../run/lock-wait.js';
import { isPostgresState, openStateBackend } from '../../state/open-backend.js';
import { RemapEngine, type RemapResult } from '../remap/remap-engine.js';
import { runBatchCommand, type BatchPlan } from '../run/batch-run.js';
import type { ServiceTarget } from '../run/connection.js';
import { EXIT, UserError } from '../run/exit-codes.js';
import { sayTo, type RunDeps } from '../run/run-deps.js';
import { remapRunArgs } from '../run/run-report.js';
import { formatCount } from '../run/summary.js';
import { planRemapDueV2 } from './remap-due-v2.js';
import {
  changesRun,
  finish,
  isoOf,
  nextDueOf,
  nothingDueLine,
  remapStart,
  remapSummary,
  writeDryRunSummary,
  type NextDue,
  type RemapDueOptions,
  type RemapDueRun,
  type RemapDueState,
} from './remap-report.js';

const DRY_RUN_DAYS = 7;

/**
 * `remap-due`: returns the exit code (0, 3 some batches failed, 130 interrupted); throws for the rest. A state file
 * made by map --api v2 is re-mapped by salt bucket (remap-due-v2.ts); a v3 state, a file or a database, by r.
 */
export function runRemapDueJob(
  options: RemapDueOptions,
  target: ServiceTarget,
  deps: RunDeps,
  startedMs: number,
): Promise<number> {
  const say = sayTo(options.output, deps);
  const opening = { envFingerprint: target.envFingerprint, create: false, readonly: options.dryRun };
  return runBatchCommand<RemapResult, StateStore | StateBackend>(
    {
      openState: () =>
        isPostgresState(options.state) ? openStateBackend(options.state, opening) : openState(options.state, opening),
      plan: async (state) => {
        if (!('kind' in state)) {
          // a v2 file is kept fresh by salt bucket rotation, not by r
          if (state.meta().api === 'v2')
            return planRemapDueV2({ state, nowS: options.nowS, options, startedMs, deps, say }, target);
          if (options.upgrade === true)
            throw new UserError(
              `--upgrade moves the entries of a v2 state file to v3; ${options.state} is a v3 state file already`,
            );
        } else if ((await state.meta()).api === 'v2' || options.upgrade === true) {
          // a v2 state stays in a file
          throw new UserError(
            `remap-due --upgrade moves the entries of a v2 state file to v3; ${state.where} is a v3 state already`,
          );
        }
        const run: RemapDueRun<RemapDueState> = { state, nowS: options.nowS, options, startedMs, deps, say };
        if (options.dryRun) return await dryRun(run);
        // a second run at the same time would send the same entries twice and race on the commits
        await lockForSweep(state, 'remap-due', options.shard, options.wait);
        return remapPlan(run, target);
      },
    },
    deps,
  );
}

async function dryRun(run: RemapDueRun<RemapDueState>): Promise<number> {
  const { state, nowS, options, deps } = run;
  const dueNow = await state.countDue(nowS);
  // day 0 is what is due now; days 1..7 are what comes due after it
  const byDay = (await state.dueByDay(nowS, DRY_RUN_DAYS + 1)).slice(1);
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
async function remapPlan(run: RemapDueRun<RemapDueState>, target: ServiceTarget): Promise<BatchPlan<RemapResult>> {
  const { state, nowS, options, startedMs, deps, say } = run;
  const { channel, concurrency } = await remapStart(run, target);
  const due = await state.countDue(nowS);
  const changes = changesRun(state, options, channel, {
    nowS,
    signal: deps.signal,
    progressLabel: 'remap-due',
    cron: true,
  });
  // nothing is due: the summary says when something will be, rather than a bare "0 entries"
  const next: NextDue | null | undefined = due === 0 ? await nextDueOf(state, nowS) : undefined;
  return {
    command: 'remap-due',
    target,
    connection: { kind: 'map', concurrency },
    record: { args: remapRunArgs(options), startS: nowS, endS: () => nowS },
    output: changes.output,
    total: () => (options.limit === undefined ? due : Math.min(due, options.limit)),
    replay: changes.replay,
    engine: (run) => new RemapEngine(changes.wiring(run)).run(),
    summary: (result, { client, replayed }) => {
      const summary = remapSummary(result, client, nowS, due, startedMs, deps.now());
      if (replayed > 0) summary.replayed_changes = replayed;
      if (next !== undefined) summary.next_due = next;
      return summary;
    },
    finish: async (result, summary, { sink, replayed }) => {
      const code = await finish(
        result,
        summary,
        sink,
        options,
        deps,
        say,
        changes.delivery(replayed, result.journalUpTo),
      );
      if (next !== undefined) say(nothingDueLine(next, nowS));
      return code;
    },
  };
}
