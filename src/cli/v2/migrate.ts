import type { Command } from 'commander';
import type { ServiceClient } from '../../client/index.js';
import { envFingerprint, type ConnectionFlags, type ResolvedConfig } from '../../config/index.js';
import { MIGRATION_FINISHED, migrateToV3, type MigrateResult } from '../../pipeline/v2/migration.js';
import {
  changesColumns,
  type RemapChange,
  changeCells,
  replayRemapChanges,
} from '../../pipeline/remap/remap-engine.js';
import type { TableSink } from '../../pipeline/io/table.js';
import { openState } from '../../state/index.js';
import type { StateStore } from '../../state/types.js';
import {
  chooseConcurrency,
  connectForMapping,
  resolveFor,
  runInProcess,
  sayTo,
  type CommandDeps,
  type Say,
} from '../shared/command-context.js';
import { EXIT, UserError } from '../shared/exit-codes.js';
import { refuseOverlappingPaths, standardOutputs } from '../shared/output-paths.js';
import {
  addConnectionOptions,
  addOutputOptions,
  addHashEncodingOption,
  addTimeFormatOption,
  connectionFlags,
  optionReaders,
  outputFlags,
  wholeNumber,
  type OutputFlags,
} from '../shared/options.js';
import {
  exitCodeOf,
  KNOWN_FAILURES,
  remapReporting,
  remapRunArgs,
  replayedLine,
  reportRun,
  requestCounters,
  withRunOutput,
  type ChangeDelivery,
} from '../shared/run-report.js';
import { formatCount, formatDuration, makeSummary, type RunSummary } from '../shared/summary.js';

export interface MigrateFlags {
  state?: string;
  dryRun: boolean;
  limit?: number;
  concurrency?: number;
  connection: ConnectionFlags;
  output: OutputFlags;
}

/** What migrate touches besides its files: injected, so tests run the command without a process. */
export type MigrateDeps = CommandDeps;

const parseConcurrency = wholeNumber('--concurrency', 1, 200);
const parseLimit = wholeNumber('--limit', 1, Number.MAX_SAFE_INTEGER);

export function registerMigrate(program: Command): void {
  const cmd = program
    .command('migrate')
    .summary('convert a v2 state file (map --api v2) to v3 by re-mapping every entry through POST /v3/identity/map')
    .description(
      [
        'Re-maps every v2 entry of the state file with v3, which gives it a refresh time r (and a previous raw UID p when its salt rotated lately) instead of a salt bucket. Each answered batch is saved at once: an interrupted run, or one cut short by --limit, continues where it stopped when run again. When no v2 entry is left, the file is marked v3: from then on use map and remap-due without --api v2.',
        'Reports how many raw UIDs stayed the same and how many changed; -o FILE writes the changed ones (kind, hash, old and new raw UID...), to update the systems that hold the old ones.',
        'Exit codes: 0 done; 1 failed (the service, the network, the state file could not be written); 2 usage, or another run is using the state file; 3 some batches failed (run again to retry them); 4 credentials refused; 130 interrupted.',
      ].join('\n\n'),
    )
    .option('--state <file>', 'the v2 state file made by map --api v2 --state FILE (required)')
    .option('--dry-run', 'count what would be re-mapped; send nothing')
    .option('--limit <n>', 'migrate at most this many entries in this run (run again for the rest)', parseLimit)
    .option(
      '--concurrency <n>',
      'requests in flight at most (default 20; at most 20 against the public service)',
      parseConcurrency,
    );
  addConnectionOptions(cmd);
  addOutputOptions(cmd);
  addTimeFormatOption(cmd);
  addHashEncodingOption(cmd, 'the hashes of the changes file');
  cmd.action((opts: Record<string, unknown>) => runInProcess((deps) => runMigrate(migrateFlags(opts), deps)));
}

export function migrateFlags(opts: Record<string, unknown>): MigrateFlags {
  const { str, num } = optionReaders(opts);
  return {
    ...(str('state') !== undefined ? { state: str('state') } : {}),
    dryRun: opts.dryRun === true,
    ...(num('limit') !== undefined ? { limit: num('limit') } : {}),
    ...(num('concurrency') !== undefined ? { concurrency: num('concurrency') } : {}),
    connection: connectionFlags(opts),
    output: outputFlags(opts),
  };
}

/** `uid2-batch migrate`: returns the exit code (0, 3 some batches failed, 130 interrupted); throws for the rest. */
export async function runMigrate(flags: MigrateFlags, deps: MigrateDeps): Promise<number> {
  const startedMs = deps.now();
  if (flags.state === undefined)
    throw new UserError('migrate needs the state file: --state FILE (made by map --api v2 --state FILE)');
  refuseOverlappingPaths([{ flag: '--state', path: flags.state }], standardOutputs(flags.output));
  const config = resolveFor(flags.connection, deps, { apiKey: !flags.dryRun, clientSecret: !flags.dryRun });
  const say = sayTo(flags.output, deps);
  const state = openState(flags.state, {
    envFingerprint: envFingerprint(config),
    create: false,
    readonly: flags.dryRun,
  });
  try {
    if (state.meta().api === 'v3') {
      const when = state.getMeta(MIGRATION_FINISHED);
      say(`${flags.state} is a v3 state file${when !== null ? ` (migrated ${when})` : ''}: nothing to migrate`);
      return EXIT.ok;
    }
    if (flags.dryRun) return dryRun(state, flags, say);
    // a second run at the same time would send the same entries twice and race on the commits
    state.lock();
    return await migrateForReal(state, config, flags, startedMs, deps, say);
  } finally {
    state.close();
  }
}

function dryRun(state: StateStore, flags: MigrateFlags, say: Say): number {
  const v2 = state.bucketEntries().count;
  const send = flags.limit === undefined ? v2 : Math.min(v2, flags.limit);
  say(
    `migrate --dry-run: nothing was sent; ${formatCount(v2)} v2 entries to re-map with v3${send < v2 ? ` (--limit takes ${formatCount(send)})` : ''}: ${formatCount(Math.ceil(send / 5000))} request(s) of up to 5,000`,
  );
  return EXIT.ok;
}

async function migrateForReal(
  state: StateStore,
  resolved: ResolvedConfig,
  flags: MigrateFlags,
  startedMs: number,
  deps: MigrateDeps,
  say: Say,
): Promise<number> {
  const nowS = Math.floor(startedMs / 1000);
  const concurrency = chooseConcurrency(flags.concurrency, resolved, say);
  const connection = await connectForMapping(resolved, concurrency);
  const { client, limiter } = connection;
  const runId = state.startRun('migrate', JSON.stringify(remapRunArgs(flags)), nowS);
  try {
    const cellsOf = (change: RemapChange): string[] =>
      changeCells(change, flags.output.timeFormat, flags.output.hashEncoding);
    return await withRunOutput(
      changesColumns(flags.output.timeFormat, false),
      'migrate',
      false,
      flags.output,
      deps,
      async (sink, progress) => {
        const v2 = state.bucketEntries().count;
        progress.update({ done: 0, total: flags.limit === undefined ? v2 : Math.min(v2, flags.limit) });
        const replayed = await replayRemapChanges(state, (changes) => sink.writeRows(changes.map(cellsOf)));
        if (replayed > 0) say(replayedLine(replayed));
        const result = await migrateToV3({
          state,
          nowS,
          journal: { runId, state },
          mapBatch: (request, signal) => client.mapV3(request, { signal }),
          limiter,
          ...(flags.limit !== undefined ? { limit: flags.limit } : {}),
          ...(deps.signal !== undefined ? { signal: deps.signal } : {}),
          ...remapReporting(sink, progress, client, cellsOf),
        });
        progress.stop();
        const summary = migrateSummary(result, client, startedMs, deps.now());
        if (replayed > 0) summary.replayed_changes = replayed;
        state.finishRun(runId, JSON.stringify(summary), exitCodeOf(result), Math.floor(deps.now() / 1000));
        return await finish(result, summary, sink, flags, deps, say, {
          state,
          kind: 'remap',
          replayed,
          upTo: result.journalUpTo,
        });
      },
    );
  } finally {
    await connection.close();
  }
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
  flags: MigrateFlags,
  deps: MigrateDeps,
  say: Say,
  delivery: ChangeDelivery,
): Promise<number> {
  const { outcome, counts } = result;
  const keep = outcome.kind === 'completed';
  await reportRun(sink, keep, formatMigrateSummary(result, summary), summary, flags.output, deps, [], {
    ...delivery,
    say,
  });
  const path = flags.state as string;
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
