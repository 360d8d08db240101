import type { Command } from 'commander';
import type { ConnectionFlags } from '../../config/index.js';
import { runBucketsJob } from '../../pipeline/jobs/buckets-job.js';
import { parseInstantMs } from '../../protocol/index.js';
import { resolveFor, runDepsOf, runInProcess, serviceTargetOf, type CommandDeps } from '../shared/command-context.js';
import { UserError } from '../shared/exit-codes.js';
import { refuseOverlappingPaths, standardOutputs } from '../shared/output-paths.js';
import {
  addConnectionOptions,
  addOutputOptions,
  connectionFlags,
  optionReaders,
  outputFlags,
  type OutputFlags,
} from '../shared/options.js';
import { v2DeprecationWarning } from '../../pipeline/v2/v2-notice.js';

export interface BucketsFlags {
  /** --since as given: ISO 8601 (no zone means UTC) or Unix seconds. */
  since?: string;
  state?: string;
  connection: ConnectionFlags;
  output: OutputFlags;
}

/** What `buckets` touches besides its files: injected, so tests run the command without a process. */
export type BucketsDeps = CommandDeps;

export function registerBuckets(program: Command): void {
  const cmd = program
    .command('buckets')
    .summary(
      'list the salt buckets rotated since a time; with --state, mark the v2 entries they make stale (POST /v2/identity/buckets)',
    )
    .description(
      [
        'v2 only. Lists the salt buckets whose salt rotated at or after --since: bucket_id and last_updated (UTC), one row each. A raw UID mapped with v2 (map --api v2) is stale once its bucket rotated after it was mapped.',
        'With --state FILE (made by map --api v2 --state FILE), marks those entries due and records the check, so that uid2-batch remap-due re-maps exactly them and its next check starts from here. remap-due does this check by itself; use buckets to look, or to mark from an earlier time.',
        'v3 needs no bucket check: each v3 mapping carries its refresh time. uid2-batch migrate --state FILE converts a v2 state file.',
      ].join('\n\n'),
    )
    .option(
      '--since <time>',
      'ISO 8601 date-time (e.g. 2026-11-01T00:00:00Z; no zone means UTC) or Unix seconds (required)',
    )
    .option('--state <file>', 'v2 state file: mark its entries of rotated buckets due, and record the check');
  addConnectionOptions(cmd);
  addOutputOptions(cmd);
  cmd.action((opts: Record<string, unknown>) =>
    runInProcess((deps) => runBuckets(bucketsFlags(opts), deps), 'interrupted: nothing more is asked'),
  );
}

export function bucketsFlags(opts: Record<string, unknown>): BucketsFlags {
  const { str } = optionReaders(opts);
  return {
    ...(str('since') !== undefined ? { since: str('since') } : {}),
    ...(str('state') !== undefined ? { state: str('state') } : {}),
    connection: connectionFlags(opts),
    output: outputFlags(opts),
  };
}

/** --since to Unix ms: ISO 8601 with or without a zone (none means UTC), or Unix seconds. */
export function parseSinceMs(text: string): number {
  const ms = parseInstantMs(text);
  if (ms === null || ms < 0 || ms > Date.UTC(9999, 11, 31)) {
    throw new UserError(
      `--since must be an ISO 8601 date-time (e.g. 2026-11-01T00:00:00Z or 2026-11-01T02:00:00+02:00; no zone means UTC) or Unix seconds (got '${text}')`,
    );
  }
  return ms;
}

/** `uid2-batch buckets`: returns the exit code; throws for failures. */
export async function runBuckets(flags: BucketsFlags, deps: BucketsDeps): Promise<number> {
  const startedMs = deps.now();
  if (flags.since === undefined)
    throw new UserError(
      'buckets needs --since TIME: list the buckets rotated since then (e.g. --since 2026-11-01T00:00:00Z)',
    );
  const sinceMs = parseSinceMs(flags.since);
  refuseOverlappingPaths([{ flag: '--state', path: flags.state }], standardOutputs(flags.output));
  const config = resolveFor(flags.connection, deps, { apiKey: true, clientSecret: true });
  deps.stderr.write(
    v2DeprecationWarning(
      'buckets (POST /v2/identity/buckets)',
      'v3 needs no bucket check: map with v3 and re-map entries past their refresh time with uid2-batch remap-due (uid2-batch migrate --state FILE converts a v2 state file)',
      startedMs,
    ),
  );
  return runBucketsJob(
    { since: flags.since, sinceMs, state: flags.state, output: flags.output },
    serviceTargetOf(config),
    runDepsOf(deps),
    startedMs,
  );
}
