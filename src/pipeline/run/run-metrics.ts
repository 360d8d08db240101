/** The run's counters in the Prometheus text exposition format, for node_exporter's textfile collector. */
import type { RunSummary } from './summary.js';

/** How a run ended, beside the summary's figures (which a run that failed early never made). */
export interface RunEnd {
  /** `map`, `remap-due`, ...: the summary's own when there is one. */
  command: string;
  exitCode: number;
  /** Wall-clock time of the run's end, Unix ms. */
  endedMs: number;
  /** Used when the run made no summary: the time from the process's start. */
  durationS: number;
}

type Labels = Readonly<Record<string, string>>;

interface Sample {
  labels: Labels;
  value: number;
}

interface Metric {
  name: string;
  help: string;
  type: 'counter' | 'gauge';
  samples: Sample[];
}

/** A label value as the format writes it: backslash, double quote and line feed escaped. */
export function escapeLabelValue(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

/** A HELP text as the format writes it: backslash and line feed escaped. */
function escapeHelp(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
}

function sampleLine(name: string, { labels, value }: Sample): string {
  const pairs = Object.entries(labels).map(([k, v]) => `${k}="${escapeLabelValue(v)}"`);
  const number = Number.isFinite(value) ? String(value) : Number.isNaN(value) ? 'NaN' : value > 0 ? '+Inf' : '-Inf';
  return `${name}{${pairs.join(',')}} ${number}`;
}

/** A figure of the summary when it is a number: commands add the fields they have (`batches_failed`, ...). */
function figure(summary: RunSummary, field: string): number | undefined {
  const value = summary[field];
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

const STATUSES = ['mapped', 'optout', 'invalid', 'error', 'missing'] as const;

/** The counters a summary holds: each one the summary's own figure, under a name and help of this format. */
function countersOf(summary: RunSummary, command: Labels): Metric[] {
  const counter = (name: string, help: string, value: number | undefined): Metric[] =>
    value === undefined ? [] : [{ name, help, type: 'counter', samples: [{ labels: command, value }] }];
  const byStatus: Sample[] = [];
  for (const status of STATUSES) {
    const value = summary.status[status];
    if (typeof value === 'number') byStatus.push({ labels: { ...command, status }, value });
  }
  // optout-check's answer for the raw UIDs that did not opt out, beside its optout, invalid and error
  const notOptedOut = figure(summary, 'not_opted_out');
  if (notOptedOut !== undefined) byStatus.push({ labels: { ...command, status: 'not_opted_out' }, value: notOptedOut });
  return [
    ...counter('uid2_batch_rows_total', 'Rows the run finished.', summary.rows),
    {
      name: 'uid2_batch_identifiers_total',
      help: 'Identifiers of the run by status (mapped, optout, invalid, error; missing: empty cells; optout-check: not_opted_out).',
      type: 'counter',
      samples: byStatus,
    },
    ...counter(
      'uid2_batch_unique_identifiers_total',
      'Distinct identifiers of the run (repeats are sent once).',
      summary.unique_identifiers,
    ),
    ...counter(
      'uid2_batch_from_state_total',
      'Identifiers answered from the state file, not sent.',
      summary.from_state,
    ),
    ...counter('uid2_batch_requests_total', 'Requests sent to the identity service.', summary.requests),
    ...counter(
      'uid2_batch_retries_total',
      'Requests sent again after a 429, a 5xx or a network error.',
      summary.retries,
    ),
    ...counter('uid2_batch_http_429_total', 'Answers 429 (too many requests) from the service.', summary.http_429),
    ...counter(
      'uid2_batch_failed_batches_total',
      'Batches that failed after their retries.',
      figure(summary, 'batches_failed'),
    ),
    ...counter(
      'uid2_batch_changed_total',
      'Entries whose raw UID changed (remap-due, migrate).',
      figure(summary, 'changed'),
    ),
    ...counter('uid2_batch_bytes_read_total', 'Bytes of input read.', figure(summary, 'bytes_read')),
    ...counter('uid2_batch_bytes_written_total', 'Bytes of output written.', figure(summary, 'bytes_written')),
  ];
}

/**
 * The text of the metrics file: the summary's counters (when the run made a summary), then its duration, exit code
 * and end time, each with its HELP and TYPE lines. Only counts and the command name: never a path, a secret or an
 * identifier.
 */
export function formatRunMetrics(summary: RunSummary | undefined, end: RunEnd): string {
  const command: Labels = { command: summary?.command ?? end.command };
  const gauge = (name: string, help: string, value: number): Metric => ({
    name,
    help,
    type: 'gauge',
    samples: [{ labels: command, value }],
  });
  const metrics: Metric[] = [
    ...(summary !== undefined ? countersOf(summary, command) : []),
    gauge('uid2_batch_run_duration_seconds', 'How long the run took.', summary?.duration_s ?? end.durationS),
    gauge(
      'uid2_batch_exit_code',
      'The exit code of the run (0 success; see the exit codes in the README).',
      end.exitCode,
    ),
    gauge(
      'uid2_batch_last_run_timestamp_seconds',
      'When the run ended, in Unix seconds.',
      Math.round(end.endedMs) / 1000,
    ),
  ];
  const lines: string[] = [];
  for (const m of metrics) {
    if (m.samples.length === 0) continue;
    lines.push(`# HELP ${m.name} ${escapeHelp(m.help)}`, `# TYPE ${m.name} ${m.type}`);
    for (const s of m.samples) lines.push(sampleLine(m.name, s));
  }
  return `${lines.join('\n')}\n`;
}
