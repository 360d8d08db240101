import type { Command } from 'commander';
import { envFingerprint, type ConnectionFlags, type ResolvedConfig } from '../../config/index.js';
import {
  checkRotatedBuckets,
  isoUtc,
  lastCheckMs,
  nextCheckSinceMs,
  sinceTimestamp,
} from '../../pipeline/v2/rotated-buckets.js';
import { openSink } from '../../pipeline/io/output/sink.js';
import type { TableSink } from '../../pipeline/io/table.js';
import { parseInstantMs } from '../../protocol/index.js';
import { openState } from '../../state/index.js';
import type { StateStore } from '../../state/types.js';
import { connect, resolveFor, runInProcess, sayTo, type CommandDeps, type Say } from '../shared/command-context.js';
import { EXIT, UserError } from '../shared/exit-codes.js';
import { refuseOverlappingPaths, standardOutputs } from '../shared/output-paths.js';
import {
  addConnectionOptions,
  addOutputOptions,
  connectionFlags,
  optionReaders,
  outputFlags,
  sinkCompression,
  type OutputFlags,
} from '../shared/options.js';
import { requestCounters } from '../shared/run-report.js';
import { formatCount, makeSummary, writeSummaryJson } from '../shared/summary.js';
import { v2DeprecationWarning } from '../shared/v2-notice.js';

export interface BucketsFlags {
  /** --since as given: ISO 8601 (no zone means UTC) or Unix seconds. */
  since?: string;
  state?: string;
  connection: ConnectionFlags;
  output: OutputFlags;
}

/** What `buckets` touches besides its files: injected, so tests run the command without a process. */
export type BucketsDeps = CommandDeps;

export const BUCKETS_HEADER = ['bucket_id', 'last_updated'] as const;

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
  const say = sayTo(flags.output, deps);
  deps.stderr.write(
    v2DeprecationWarning(
      'buckets (POST /v2/identity/buckets)',
      'v3 needs no bucket check: map with v3 and re-map entries past their refresh time with uid2-batch remap-due (uid2-batch migrate --state FILE converts a v2 state file)',
      startedMs,
    ),
  );
  const state = flags.state === undefined ? undefined : openV2State(flags.state, envFingerprint(config));
  try {
    return await listBuckets(flags, sinceMs, config, state, startedMs, deps, say);
  } finally {
    state?.close();
  }
}

function openV2State(path: string, fingerprint: string): StateStore {
  const state = openState(path, { envFingerprint: fingerprint, create: false });
  try {
    if (state.meta().api !== 'v2') {
      throw new UserError(
        `--state ${path} is a v3 state file: its entries are due by refresh time (uid2-batch remap-due), not by salt bucket`,
      );
    }
    // the marks and the check time must not race another run's
    state.lock();
    return state;
  } catch (err) {
    state.close();
    throw err;
  }
}

async function listBuckets(
  flags: BucketsFlags,
  sinceMs: number,
  resolved: ResolvedConfig,
  state: StateStore | undefined,
  startedMs: number,
  deps: BucketsDeps,
  say: Say,
): Promise<number> {
  const connection = await connect(resolved);
  const client = connection.client;
  let sink: TableSink | undefined;
  const runId = state?.startRun(
    'buckets',
    JSON.stringify({ since: flags.since, output: flags.output.output ?? '-', format: flags.output.format }),
    Math.floor(startedMs / 1000),
  );
  try {
    const lastCheck = state === undefined ? null : lastCheckMs(state);
    const coverFrom = state === undefined ? null : nextCheckSinceMs(state);
    const check = await checkRotatedBuckets({
      client,
      sinceMs,
      checkedAtMs: deps.now(),
      ...(state !== undefined ? { state } : {}),
      ...(deps.signal !== undefined ? { signal: deps.signal } : {}),
    });
    sink = await openSink({
      path: flags.output.output,
      format: flags.output.format,
      ...sinkCompression(flags.output),
      header: [...BUCKETS_HEADER],
      stream: deps.stdout,
    });
    const rows = check.buckets.map((b) => [b.bucketId, isoUtc(b.lastUpdatedMs)]);
    for (let i = 0; i < rows.length; i += 10_000) await sink.writeRows(rows.slice(i, i + 10_000));
    await sink.commit();

    const asked = `${sinceTimestamp(sinceMs)}Z`;
    say(`buckets: ${formatCount(check.buckets.length)} salt bucket(s) rotated since ${asked}`);
    if (state !== undefined && flags.state !== undefined) {
      say(
        `${formatCount(check.marked)} entr${check.marked === 1 ? 'y' : 'ies'} of ${flags.state} marked due (uid2-batch remap-due --state ${flags.state} re-maps them); ${formatCount(state.countDueV2())} due in all`,
      );
      if (!check.recorded && coverFrom !== null) {
        say(
          `--since is after the ${lastCheck !== null ? 'last check' : 'oldest mapping'} (${isoUtc(coverFrom)}): buckets rotated in between were not asked for, ` +
            `so the check time was not moved; remap-due will ask from ${isoUtc(coverFrom)}`,
        );
      }
    }
    const summary = makeSummary({
      command: 'buckets',
      rows: check.buckets.length,
      ...requestCounters(client.stats),
      startedMs,
      endedMs: deps.now(),
      extra: {
        since: asked,
        buckets: check.buckets.length,
        ...(state !== undefined
          ? { marked_due: check.marked, due: state.countDueV2(), check_recorded: check.recorded }
          : {}),
      },
    });
    if (runId !== undefined) state?.finishRun(runId, JSON.stringify(summary), EXIT.ok, Math.floor(deps.now() / 1000));
    if (flags.output.summaryJson !== undefined) await writeSummaryJson(flags.output.summaryJson, summary);
    return EXIT.ok;
  } catch (err) {
    await sink?.abort();
    // Ctrl-C: onInterrupt has said so; the marks are one transaction, so they are whole or not there
    if (deps.signal?.aborted === true) return EXIT.interrupted;
    throw err;
  } finally {
    await connection.close();
  }
}
