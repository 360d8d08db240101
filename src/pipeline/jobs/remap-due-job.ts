/** A whole remap-due run: the state file opened, what is due re-mapped, the changes file written. */
import { openState } from '../../state/index.js';
import {
  changesColumns,
  type RemapChange,
  changeCells,
  RemapEngine,
  replayRemapChanges,
} from '../remap/remap-engine.js';
import { chooseConcurrency, connectForMapping, type ServiceTarget } from '../run/connection.js';
import { EXIT, UserError } from '../run/exit-codes.js';
import { sayTo, type RunDeps } from '../run/run-deps.js';
import { exitCodeOf, remapRunArgs, replayedLine, withRunOutput } from '../run/run-report.js';
import { formatCount } from '../run/summary.js';
import { runRemapDueV2 } from './remap-due-v2.js';
import {
  finish,
  isoOf,
  nextDue,
  nothingDueLine,
  remapReporting,
  remapSummary,
  writeDryRunSummary,
  type RemapDueOptions,
  type RemapDueRun,
} from './remap-report.js';

const DRY_RUN_DAYS = 7;

/** `remap-due`: returns the exit code (0, 3 some batches failed, 130 interrupted); throws for the rest. */
export async function runRemapDueJob(
  options: RemapDueOptions,
  target: ServiceTarget,
  deps: RunDeps,
  startedMs: number,
): Promise<number> {
  const say = sayTo(options.output, deps);
  const state = openState(options.state, {
    envFingerprint: target.envFingerprint,
    create: false,
    readonly: options.dryRun,
  });
  const run: RemapDueRun = { state, nowS: options.nowS, options, startedMs, deps, say };
  try {
    // a v2 file is kept fresh by salt bucket rotation, not by r
    if (state.meta().api === 'v2') return await runRemapDueV2(run, target);
    if (options.upgrade === true)
      throw new UserError(
        `--upgrade moves the entries of a v2 state file to v3; ${options.state} is a v3 state file already`,
      );
    if (options.dryRun) return await dryRun(run);
    // a second run at the same time would send the same entries twice and race on the commits
    await state.waitForLock((options.wait ?? 0) * 1000);
    return await remapForReal(run, target);
  } finally {
    state.close();
  }
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

async function remapForReal(run: RemapDueRun, target: ServiceTarget): Promise<number> {
  const { state, nowS, options, startedMs, deps, say } = run;
  const concurrency = chooseConcurrency(options.concurrency, target, say);
  const due = state.countDue(nowS);
  const total = options.limit === undefined ? due : Math.min(due, options.limit);
  const connection = await connectForMapping(
    target,
    concurrency,
    deps.client !== undefined ? { client: deps.client } : {},
  );
  const { client, limiter } = connection;
  const runId = state.startRun('remap-due', JSON.stringify(remapRunArgs(options)), nowS);
  try {
    const cellsOf = (change: RemapChange): string[] =>
      changeCells(change, options.output.timeFormat, options.output.hashEncoding);
    return await withRunOutput(
      changesColumns(options.output.timeFormat, false),
      'remap-due',
      true,
      options.output,
      deps,
      async (sink, progress) => {
        progress.update({ done: 0, total });
        const replayed = await replayRemapChanges(state, (changes) => sink.writeRows(changes.map(cellsOf)));
        if (replayed > 0) say(replayedLine(replayed));
        const engine = new RemapEngine({
          state,
          nowS,
          journal: { runId, state },
          mapBatch: (request, signal) => client.mapV3(request, { signal }),
          limiter,
          ...(options.limit !== undefined ? { limit: options.limit } : {}),
          ...(deps.signal !== undefined ? { signal: deps.signal } : {}),
          ...remapReporting(sink, progress, client, cellsOf),
        });
        const result = await engine.run();
        progress.stop();
        const summary = remapSummary(result, client, nowS, due, startedMs, deps.now());
        if (replayed > 0) summary.replayed_changes = replayed;
        // nothing was due: say when something will be, rather than a bare "0 entries"
        const next = due === 0 ? nextDue(state, nowS) : undefined;
        if (next !== undefined) summary.next_due = next;
        state.finishRun(runId, JSON.stringify(summary), exitCodeOf(result), nowS);
        const code = await finish(result, summary, sink, options, deps, say, {
          state,
          kind: 'remap',
          replayed,
          upTo: result.journalUpTo,
        });
        if (next !== undefined) say(nothingDueLine(next, nowS));
        return code;
      },
    );
  } finally {
    await connection.close();
  }
}
