import type { Command } from 'commander';
import { envFingerprint, type ResolvedConfig } from '../../config/index.js';
import {
  changesColumns,
  type RemapChange,
  changeCells,
  RemapEngine,
  replayRemapChanges,
} from '../../pipeline/remap/remap-engine.js';
import { parseInstantMs } from '../../protocol/index.js';
import { openState } from '../../state/index.js';
import {
  chooseConcurrency,
  connectForMapping,
  PUBLIC_MAX_CONCURRENCY,
  resolveFor,
  runInProcess,
  sayTo,
} from '../shared/command-context.js';
import { EXIT, UserError } from '../shared/exit-codes.js';
import { refuseOverlappingPaths, standardOutputs } from '../shared/output-paths.js';
import {
  addConnectionOptions,
  addLockWaitOption,
  addOutputOptions,
  addHashEncodingOption,
  addTimeFormatOption,
  connectionFlags,
  optionReaders,
  outputFlags,
  wholeNumber,
} from '../shared/options.js';
import { exitCodeOf, remapReporting, remapRunArgs, replayedLine, withRunOutput } from '../shared/run-report.js';
import { formatCount } from '../shared/summary.js';
import { runRemapDueV2 } from './remap-due-v2.js';
import {
  finish,
  isoOf,
  nextDue,
  nothingDueLine,
  remapSummary,
  writeDryRunSummary,
  type RemapDueDeps,
  type RemapDueFlags,
  type RemapDueRun,
} from './remap-report.js';

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
        'Exit codes: 0 done; 1 failed (the service, the network, the state file could not be written); 2 usage, or another run is using the state file; 3 some batches failed (their entries stay due for the next run); 4 credentials refused; 130 interrupted.',
      ].join('\n\n'),
    )
    .option('--state <file>', 'the state file made by map --state (required)')
    .option('--now <time>', 'plan against this time instead of the clock: ISO 8601 (no zone means UTC) or Unix seconds')
    .option('--dry-run', 'count what is due now and on each of the next 7 days; send nothing')
    .option('--limit <n>', 'remap at most this many entries in this run (the most overdue first)', parseLimit)
    .option(
      '--concurrency <n>',
      `requests in flight at most (default 20; at most ${PUBLIC_MAX_CONCURRENCY} against the public service)`,
      parseConcurrency,
    )
    .option(
      '--upgrade',
      'v2 state file: re-map the entries of rotated buckets with v3 instead of v2 (they become v3 entries with a refresh time)',
    );
  addLockWaitOption(cmd, 'the state file (another remap-due, a map --state)');
  addConnectionOptions(cmd);
  addOutputOptions(cmd);
  addTimeFormatOption(cmd);
  addHashEncodingOption(cmd, 'the hashes of the changes file');
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
    ...(num('wait') !== undefined ? { wait: num('wait') } : {}),
    connection: connectionFlags(opts),
    output: outputFlags(opts),
  };
}

/** --now: ISO 8601 or Unix seconds, to Unix seconds. */
export function parseNowS(text: string): number {
  const ms = parseInstantMs(text);
  if (ms === null || ms < 0 || ms > Date.UTC(9999, 11, 31)) {
    throw new UserError(
      `--now must be an ISO 8601 date-time (e.g. 2026-01-01T00:30:00Z; no zone means UTC) or Unix seconds (got '${text}')`,
    );
  }
  return Math.floor(ms / 1000);
}

/** `uid2-batch remap-due`: returns the exit code (0, 3 some batches failed, 130 interrupted); throws for the rest. */
export async function runRemapDue(flags: RemapDueFlags, deps: RemapDueDeps): Promise<number> {
  const startedMs = deps.now();
  if (flags.state === undefined)
    throw new UserError('remap-due needs the state file: --state FILE (made by map --state FILE)');
  refuseOverlappingPaths([{ flag: '--state', path: flags.state }], standardOutputs(flags.output));
  const nowS = flags.now !== undefined ? parseNowS(flags.now) : Math.floor(startedMs / 1000);
  const config = resolveFor(flags.connection, deps, { apiKey: !flags.dryRun, clientSecret: !flags.dryRun });
  const say = sayTo(flags.output, deps);
  const state = openState(flags.state, {
    envFingerprint: envFingerprint(config),
    create: false,
    readonly: flags.dryRun,
  });
  const run: RemapDueRun = { state, nowS, flags, startedMs, deps, say };
  try {
    // a v2 file is kept fresh by salt bucket rotation, not by r
    if (state.meta().api === 'v2') return await runRemapDueV2(run, config);
    if (flags.upgrade === true)
      throw new UserError(
        `--upgrade moves the entries of a v2 state file to v3; ${flags.state} is a v3 state file already`,
      );
    if (flags.dryRun) return await dryRun(run);
    // a second run at the same time would send the same entries twice and race on the commits
    await state.waitForLock((flags.wait ?? 0) * 1000);
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

async function remapForReal(run: RemapDueRun, resolved: ResolvedConfig): Promise<number> {
  const { state, nowS, flags, startedMs, deps, say } = run;
  const concurrency = chooseConcurrency(flags.concurrency, resolved, say);
  const due = state.countDue(nowS);
  const total = flags.limit === undefined ? due : Math.min(due, flags.limit);
  const connection = await connectForMapping(resolved, concurrency);
  const { client, limiter } = connection;
  const runId = state.startRun('remap-due', JSON.stringify(remapRunArgs(flags)), nowS);
  try {
    const cellsOf = (change: RemapChange): string[] =>
      changeCells(change, flags.output.timeFormat, flags.output.hashEncoding);
    return await withRunOutput(
      changesColumns(flags.output.timeFormat, false),
      'remap-due',
      true,
      flags.output,
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
          ...(flags.limit !== undefined ? { limit: flags.limit } : {}),
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
        const code = await finish(result, summary, sink, flags, deps, say, {
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
