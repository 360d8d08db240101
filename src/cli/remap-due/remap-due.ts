import type { Command } from 'commander';
import type { Shard } from '../../pipeline/shard/shard-spec.js';
import { addShardOption, shardFlag } from '../shared/shard-option.js';
import type { ConnectionFlags } from '../../config/index.js';
import { runRemapDueJob } from '../../pipeline/jobs/remap-due-job.js';
import type { RemapDueOptions } from '../../pipeline/jobs/remap-report.js';
import { PUBLIC_MAX_CONCURRENCY } from '../../pipeline/run/connection.js';
import { parseInstantMs } from '../../protocol/index.js';
import {
  resolveFor,
  runDepsOf,
  runInProcess,
  serviceTargetOf,
  stateFor,
  type CommandDeps,
} from '../shared/command-context.js';
import { UserError } from '../shared/exit-codes.js';
import { addS3EndpointOption } from '../shared/s3-endpoint-option.js';
import { refuseOverlappingPaths, standardOutputs } from '../shared/output-paths.js';
import {
  addConnectionOptions,
  addLockWaitOption,
  addMetricsFileOption,
  addOutputOptions,
  addHashEncodingOption,
  addTimeFormatOption,
  connectionFlags,
  optionReaders,
  outputFlags,
  wholeNumber,
  type OutputFlags,
} from '../shared/options.js';

/** remap-due's flags as commander gives them, typed. */
export interface RemapDueFlags {
  state?: string;
  /** --now as given (ISO 8601 or Unix seconds). */
  now?: string;
  dryRun: boolean;
  limit?: number;
  concurrency?: number;
  /** v2 state: re-map the entries of rotated buckets with v3, which turns them into v3 entries. */
  upgrade?: boolean;
  /** --wait: seconds to wait for another run's lock on the state file (absent: fail at once). */
  wait?: number;
  /** --shard K/N: re-map only the due entries whose key falls to runner K. */
  shard?: Shard;
  connection: ConnectionFlags;
  output: OutputFlags;
}

/** What remap-due touches besides its files: injected, so tests run the command without a process. */
export type RemapDueDeps = CommandDeps;

const parseConcurrency = wholeNumber('--concurrency', 1, 200);
const parseLimit = wholeNumber('--limit', 1, Number.MAX_SAFE_INTEGER);

export function registerRemapDue(program: Command): void {
  const cmd = program
    .command('remap-due')
    .summary('re-map the entries of a state file whose refresh time has passed (nightly, from cron)')
    .description(
      [
        'Re-maps only the entries of the state whose refresh time r has passed (r <= now): a run sends what is due (about 1/365 of the entries a day), not what is stored. Each answered batch is saved at once, so an interrupted run resumes by running it again (under --shard K/N, with the same K/N: the changes a shard found are written by its own runs only).',
        'Writes a changes file: one row per entry whose raw UID changed, or that opted out (it is then tombstoned: hash kept, raw UIDs dropped, never sent again) or became invalid.',
        'r falls on a UTC midnight: schedule the job after 00:00 UTC, e.g. in a crontab: 30 0 * * * uid2-batch remap-due --state /data/s.db -o /data/changes-$(date -u +\\%F).csv',
        'Exit codes: 0 done; 1 failed (the service, the network, the state file could not be written); 2 usage, or another run is using the state file; 3 some batches failed (their entries stay due for the next run); 4 credentials refused; 130 interrupted.',
      ].join('\n\n'),
    )
    .option(
      '--state <file>',
      "the state made by map --state: a file or a postgres:// URL (default: UID2_BATCH_STATE, or the profile's state)",
    )
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
  addLockWaitOption(cmd, 'the state (another remap-due, a map --state; on a database, a remap-due of the same share)');
  addS3EndpointOption(cmd, 'an s3:// changes file (-o)');
  addShardOption(
    cmd,
    "re-map only the due entries whose key falls to this runner (by a hash of the key); all runners use one N, and a failed runner's changes come with the next run of its K/N",
  );
  addConnectionOptions(cmd);
  addOutputOptions(cmd);
  addMetricsFileOption(cmd);
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
    ...(shardFlag(opts) !== undefined ? { shard: shardFlag(opts) } : {}),
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
export async function runRemapDue(given: RemapDueFlags, deps: RemapDueDeps): Promise<number> {
  const startedMs = deps.now();
  const state = stateFor(given.connection, given.state, deps);
  const flags: RemapDueFlags = state === undefined ? given : { ...given, state };
  if (flags.state === undefined)
    throw new UserError(
      "remap-due needs the state file: --state FILE (made by map --state FILE), or UID2_BATCH_STATE, or a profile's state",
    );
  refuseOverlappingPaths([{ flag: '--state', path: flags.state }], standardOutputs(flags.output), true);
  const nowS = flags.now !== undefined ? parseNowS(flags.now) : Math.floor(startedMs / 1000);
  const config = resolveFor(flags.connection, deps, { apiKey: !flags.dryRun, clientSecret: !flags.dryRun });
  const options: RemapDueOptions = {
    state: flags.state,
    now: flags.now,
    nowS,
    dryRun: flags.dryRun,
    limit: flags.limit,
    concurrency: flags.concurrency,
    upgrade: flags.upgrade,
    wait: flags.wait,
    shard: flags.shard,
    output: flags.output,
  };
  return runRemapDueJob(options, serviceTargetOf(config), runDepsOf(deps), startedMs);
}
