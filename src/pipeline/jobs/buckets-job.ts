/** A whole buckets run: the salt buckets rotated since a time listed, and with a v2 state file their entries marked due. */
import { openState } from '../../state/index.js';
import type { StateStore } from '../../state/index.js';
import { refuseDatabaseState } from './state-where.js';
import { openSink } from '../io/output/sink.js';
import type { TableSink } from '../io/table.js';
import { connect, type ServiceTarget } from '../run/connection.js';
import { EXIT, UserError } from '../run/exit-codes.js';
import { sinkCompression, type OutputFlags } from '../run/output-options.js';
import { sayTo, type RunDeps, type Say } from '../run/run-deps.js';
import { requestCounters } from '../run/run-report.js';
import { formatCount, makeSummary, writeSummaryJson } from '../run/summary.js';
import { checkRotatedBuckets, isoUtc, lastCheckMs, nextCheckSinceMs, sinceTimestamp } from '../v2/rotated-buckets.js';

export const BUCKETS_HEADER = ['bucket_id', 'last_updated'] as const;

/** What a buckets run is asked to do, checked. */
export interface BucketsOptions {
  /** --since as given, for the runs table and the summary. */
  since: string;
  sinceMs: number;
  /** A v2 state file whose entries of rotated buckets are marked due. */
  state?: string | undefined;
  output: OutputFlags;
}

/** `buckets`: returns the exit code; throws for failures. */
export async function runBucketsJob(
  options: BucketsOptions,
  target: ServiceTarget,
  deps: RunDeps,
  startedMs: number,
): Promise<number> {
  const say = sayTo(options.output, deps);
  const state = options.state === undefined ? undefined : openV2State(options.state, target.envFingerprint);
  try {
    return await listBuckets(options, target, state, startedMs, deps, say);
  } finally {
    state?.close();
  }
}

function openV2State(path: string, fingerprint: string): StateStore {
  refuseDatabaseState(path, 'buckets', 'a v2 state stays in a file; give --state the file made by map --api v2');
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
  options: BucketsOptions,
  target: ServiceTarget,
  state: StateStore | undefined,
  startedMs: number,
  deps: RunDeps,
  say: Say,
): Promise<number> {
  const sinceMs = options.sinceMs;
  const connection = await connect(target, deps.client !== undefined ? { client: deps.client } : {});
  const client = connection.client;
  let sink: TableSink | undefined;
  const runId = state?.startRun(
    'buckets',
    JSON.stringify({ since: options.since, output: options.output.output ?? '-', format: options.output.format }),
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
      path: options.output.output,
      format: options.output.format,
      ...sinkCompression(options.output),
      header: [...BUCKETS_HEADER],
      stream: deps.stdout,
    });
    const rows = check.buckets.map((b) => [b.bucketId, isoUtc(b.lastUpdatedMs)]);
    for (let i = 0; i < rows.length; i += 10_000) await sink.writeRows(rows.slice(i, i + 10_000));
    await sink.commit();

    const asked = `${sinceTimestamp(sinceMs)}Z`;
    say(`buckets: ${formatCount(check.buckets.length)} salt bucket(s) rotated since ${asked}`);
    if (state !== undefined && options.state !== undefined) {
      say(
        `${formatCount(check.marked)} entr${check.marked === 1 ? 'y' : 'ies'} of ${options.state} marked due (uid2-batch remap-due --state ${options.state} re-maps them); ${formatCount(state.countDueV2())} due in all`,
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
    if (options.output.summaryJson !== undefined) await writeSummaryJson(options.output.summaryJson, summary);
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
