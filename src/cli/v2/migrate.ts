import type { Command } from 'commander';
import type { ConnectionFlags } from '../../config/index.js';
import { runMigrateJob } from '../../pipeline/jobs/migrate-job.js';
import { resolveFor, runDepsOf, runInProcess, serviceTargetOf, type CommandDeps } from '../shared/command-context.js';
import { UserError } from '../shared/exit-codes.js';
import { refuseOverlappingPaths, standardOutputs } from '../shared/output-paths.js';
import {
  addConnectionOptions,
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
  addMetricsFileOption(cmd);
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
  return runMigrateJob(
    {
      state: flags.state,
      dryRun: flags.dryRun,
      limit: flags.limit,
      concurrency: flags.concurrency,
      output: flags.output,
    },
    serviceTargetOf(config),
    runDepsOf(deps),
    startedMs,
  );
}
