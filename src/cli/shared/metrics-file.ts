// The end of a batch run with --metrics-file: its counters, exit code and end time, written whatever happened.
import { writeTextOutput } from '../../pipeline/io/output/text-output.js';
import { formatRunMetrics } from '../../pipeline/run/run-metrics.js';
import { lastRunSummary } from '../../pipeline/run/summary.js';
import { mayReplaceOwnOutput } from './own-file.js';
import { mayWriteReportAt } from './report-commands.js';

/** The commands that take --metrics-file: those that run batches against the service. */
export const METRICS_COMMANDS: ReadonlySet<string> = new Set(['map', 'remap-due', 'optout-check', 'migrate']);

/** How much of an existing file is read to recognize a metrics file of this tool. */
const HEAD_BYTES = 64;
const OWN_HEAD = '# HELP uid2_batch_';

/** The line that refuses a --metrics-file naming some other file (or S3 object), before the run starts. */
export async function refusedMetricsPath(path: string): Promise<string | undefined> {
  if (await mayHoldMetrics(path)) return undefined;
  return `--metrics-file ${path} exists and is not a metrics file of this tool: name a new file (e.g. uid2_batch.prom) or remove it`;
}

/**
 * True when `path` may be replaced by a metrics file: it does not exist, it is empty, or it is one this tool
 * wrote. Anything else (an input named by mistake) is never replaced.
 */
export function mayHoldMetrics(path: string): Promise<boolean> {
  return mayReplaceOwnOutput(
    path,
    HEAD_BYTES,
    (size, head) => size === 0 || head().toString('utf8').startsWith(OWN_HEAD),
  );
}

export interface MetricsEnd {
  /** From --metrics-file. */
  path: string;
  /** The command words, for a run that ended before it made a summary. */
  command: string;
  exitCode: number;
  /** When the process started and now, Unix ms. */
  startedMs: number;
  endedMs: number;
}

/**
 * Writes the run's metrics file whole (a temp file beside it, then renamed; an s3:// object in one PUT: the
 * collector never reads half a file), from the summary the run made, or with only its duration and exit code when
 * it failed before making one. Returns a line to print when the file cannot be written.
 */
export async function completeMetricsFile(end: MetricsEnd): Promise<string | undefined> {
  if (!mayWriteReportAt(end.command, end.path)) return undefined;
  const text = formatRunMetrics(lastRunSummary(), {
    command: end.command,
    exitCode: end.exitCode,
    endedMs: end.endedMs,
    durationS: Math.max(0, end.endedMs - end.startedMs) / 1000,
  });
  try {
    await writeTextOutput(end.path, text);
    return undefined;
  } catch (err) {
    return `cannot write --metrics-file ${end.path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`;
  }
}
