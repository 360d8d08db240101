/** How a batch run reports: its output kept or dropped, its summary line and --summary-json, its exit code. */
import { statSync } from 'node:fs';
import { commitTogether, type RunOutput } from '../io/output/commit-together.js';
import { openSink } from '../io/output/sink.js';
import type { TableSink } from '../io/table.js';
import type { TypedHeader } from '../io/typed-cells.js';
import { type ChangeChannel, type ChangeJournal, deliveringOutput } from './change-journal.js';
import type { ClientStats } from './connection.js';
import { EXIT } from './exit-codes.js';
import { writeLine } from './log-lines.js';
import { sinkCompression, type OutputFlags } from './output-options.js';
import { startProgress, type RunDeps, type RunProgress } from './run-deps.js';
import { writeSummaryJson, type RunSummary, type SummaryCounters } from './summary.js';

/** How every batch run ends; the engines' outcomes all have this shape. */
export interface BatchRunResult {
  outcome: { kind: 'completed' | 'interrupted' | 'auth-refused' | 'failed' };
  counts: { status: { error: number } };
}

export function exitCodeOf(result: BatchRunResult): number {
  switch (result.outcome.kind) {
    case 'completed':
      return result.counts.status.error === 0 ? EXIT.ok : EXIT.partial;
    case 'interrupted':
      return EXIT.interrupted;
    case 'auth-refused':
      return EXIT.auth;
    case 'failed':
      return EXIT.failed;
  }
}

/** Failures whose message is already meant for the user; anything else is a bug and keeps its stack for UID2_DEBUG. */
export const KNOWN_FAILURES: ReadonlySet<string> = new Set([
  'ClockSkewError',
  'SqliteError',
  'OutputError',
  'ServiceError',
  'ClientError',
  'ServerError',
  'RateLimitedError',
  'PayloadTooLargeError',
  'NetworkError',
  'UnexpectedResponseError',
  'MalformedAnswerError',
  'EnvelopeError',
  'ServiceUnreachableError',
  'CredentialsRefusedError',
]);

/**
 * The size of the output file a run kept (`bytes_written`, as stored: a gzip output's compressed bytes); nothing for
 * stdout, whose bytes the reader counts.
 */
export function outputBytes(path: string | undefined): { bytes_written?: number } {
  if (path === undefined || path === '-') return {};
  try {
    const stat = statSync(path);
    return stat.isFile() ? { bytes_written: stat.size } : {};
  } catch {
    return {};
  }
}

/** The summary's request counters, from the client's. */
export function requestCounters(
  stats: ClientStats,
): Required<Pick<SummaryCounters, 'requests' | 'retries' | 'http_429'>> {
  return { requests: stats.requests, retries: stats.retries, http_429: stats.http429 };
}

/**
 * The progress of a run. `cron`: no spinner and no progress lines when stderr is not a terminal, only the
 * summary line.
 */
function runProgress(label: string, output: OutputFlags, deps: RunDeps, cron: boolean): RunProgress {
  return startProgress(deps, {
    label,
    quiet: output.quiet === true || (cron && deps.stderr.isTTY !== true),
    dataOnStdout: output.output === undefined,
  });
}

/**
 * Opens the run's output (-o FILE or stdout, with `columns`: names, or names with types for JSONL; or the
 * command's own, `open`) and its progress, then does the work. When the work throws, the progress stops and the
 * output is dropped, so a failed run never leaves a file that looks complete.
 */
export async function withRunOutput<T>(
  columns: readonly string[] | TypedHeader,
  progressLabel: string,
  cron: boolean,
  output: OutputFlags,
  deps: RunDeps,
  work: (sink: TableSink, progress: RunProgress) => Promise<T>,
  open?: () => Promise<TableSink>,
): Promise<T> {
  let sink: TableSink | undefined;
  let progress: RunProgress | undefined;
  try {
    const typed = 'types' in columns ? columns : undefined;
    const header = typed !== undefined ? typed.header : (columns as readonly string[]);
    sink =
      open !== undefined
        ? await open()
        : await openSink({
            path: output.output,
            format: output.format,
            ...sinkCompression(output),
            header: [...header],
            ...(typed !== undefined ? { types: typed.types } : {}),
            stream: deps.stdout,
          });
    progress = runProgress(progressLabel, output, deps, cron);
    return await work(sink, progress);
  } catch (err) {
    progress?.stop();
    await sink?.abort();
    throw err;
  }
}

/**
 * Keeps or drops the output (with `together`, the run's other outputs, renamed into place with it), then says the
 * summary line (unless --quiet) and writes --summary-json. With `delivery`, an output kept (a completed run's) holds
 * the pending changes up to `delivery.upTo`: they are delivered with its rename, so no later run writes them again
 * (see pipeline/run/change-journal.ts); an output dropped leaves them pending for the next completed run.
 */
export async function reportRun(
  sink: TableSink,
  keepOutput: boolean,
  summaryLine: string,
  summary: RunSummary,
  output: OutputFlags,
  deps: Pick<RunDeps, 'stderr'>,
  together: readonly (RunOutput | undefined)[] = [],
  delivery?: ChangeDelivery & { say: (line: string) => void },
): Promise<void> {
  if (keepOutput) {
    const main = delivery === undefined ? sink : deliveringOutput(sink, delivery.state, delivery, delivery.say);
    await commitTogether([main, ...together]);
    Object.assign(summary, outputBytes(output.output));
  } else {
    await sink.abort();
    for (const other of together) await other?.abort();
  }
  if (!output.quiet) writeLine(deps.stderr, summaryLine, { counts: summary });
  if (output.summaryJson !== undefined) await writeSummaryJson(output.summaryJson, summary);
}

/** The pending changes a run wrote, and how it says so. */
export interface ChangeDelivery {
  state: Pick<ChangeJournal, 'ackChanges' | 'setMeta'>;
  channel: ChangeChannel;
  /** Rows of earlier runs written first into this run's output. */
  replayed: number;
  /** The last pending id this run's output holds (RemapResult.journalUpTo); null when none. */
  upTo: number | null;
}

/** The line that tells the user an earlier run's changes are in this output. */
export function replayedLine(replayed: number): string {
  return `${replayed.toLocaleString('en-US')} changes of an interrupted earlier run included`;
}

/** What the runs table keeps of a re-mapping run's flags: no credentials and no paths beyond the state's own. */
export function remapRunArgs(flags: {
  now?: string;
  limit?: number;
  concurrency?: number;
  output: OutputFlags;
}): Record<string, unknown> {
  return {
    ...(flags.now !== undefined ? { now: flags.now } : {}),
    ...(flags.limit !== undefined ? { limit: flags.limit } : {}),
    ...(flags.concurrency !== undefined ? { concurrency: flags.concurrency } : {}),
    output: flags.output.output ?? '-',
    format: flags.output.format,
  };
}
