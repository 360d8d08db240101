/** The run summary every batch command ends with: its counts, its line on stderr and --summary-json. */
import { writeTextOutput } from '../io/output/text-output.js';
import { writeLine } from './log-lines.js';

export interface StatusCounts {
  mapped: number;
  optout: number;
  invalid: number;
  error: number;
  /** Empty identifier cells (map): nothing to send. */
  missing?: number;
}

/**
 * The run summary of every command that sends requests (`--summary-json` writes its fields as they are).
 * `status` counts identifiers when a row has several identifier columns. Commands may add their own fields
 * (`batches`, `due`, ...): they are written too.
 */
export interface RunSummary {
  /** The command that ran: `map`, `remap-due`, ... */
  command: string;
  rows: number;
  status: StatusCounts;
  unique_identifiers: number;
  from_state: number;
  requests: number;
  retries: number;
  http_429: number;
  duration_s: number;
  rows_per_s: number;
  [extra: string]: unknown;
}

export interface SummaryCounters {
  command: string;
  rows: number;
  status?: Partial<StatusCounts>;
  unique_identifiers?: number;
  from_state?: number;
  requests?: number;
  retries?: number;
  http_429?: number;
  /** Milliseconds, from the run's clock. */
  startedMs: number;
  endedMs: number;
  extra?: Record<string, unknown>;
}

/** The summary the last run of this process made: what the end of the run reports (--metrics-file). */
let lastMade: RunSummary | undefined;

export function lastRunSummary(): RunSummary | undefined {
  return lastMade;
}

/** Builds a RunSummary: duration in seconds (ms precision) and throughput from the counters. */
export function makeSummary(c: SummaryCounters): RunSummary {
  const duration = Math.max(0, c.endedMs - c.startedMs) / 1000;
  lastMade = {
    ...c.extra,
    command: c.command,
    rows: c.rows,
    status: { mapped: 0, optout: 0, invalid: 0, error: 0, ...c.status },
    unique_identifiers: c.unique_identifiers ?? 0,
    from_state: c.from_state ?? 0,
    requests: c.requests ?? 0,
    retries: c.retries ?? 0,
    http_429: c.http_429 ?? 0,
    duration_s: Math.round(duration * 1000) / 1000,
    rows_per_s: duration > 0 ? Math.round(c.rows / duration) : 0,
  };
  return lastMade;
}

// Fixed locale: cron mail and log greps must not change with the machine's LANG. The figures are written by hand as
// en-US writes them (comma thousands; the shortest decimal of the number rounded half away from zero, "-0" for a
// negative that rounds to zero): the first Intl.NumberFormat of a process loads the locale data, which every run
// paid for at start. test/pipeline/summary-numbers.test.ts holds it to Intl.
const THOUSANDS = /\B(?=(\d{3})+(?!\d))/g;

function grouped(n: number, fractionDigits: 0 | 1): string {
  const size = Math.abs(n);
  // exponent notation (from 1e21), NaN and infinities: no count or rate is one
  if (!Number.isFinite(n) || size >= 1e21)
    return new Intl.NumberFormat('en-US', { maximumFractionDigits: fractionDigits }).format(n);
  const sign = n < 0 || Object.is(n, -0) ? '-' : '';
  // below 1e-6 the shortest decimal has an exponent; such a number rounds to zero at one decimal anyway
  const [whole, fraction = ''] = (size < 1e-6 ? '0' : String(size)).split('.');
  let digits = whole + fraction.slice(0, fractionDigits).padEnd(fractionDigits, '0');
  if (fraction.charCodeAt(fractionDigits) >= 53) digits = String(BigInt(digits) + 1n);
  const integer = digits.slice(0, digits.length - fractionDigits).replace(THOUSANDS, ',') || '0';
  const decimals = digits.slice(digits.length - fractionDigits).replace(/0+$/, '');
  return `${sign}${integer}${decimals === '' ? '' : `.${decimals}`}`;
}

/** 10000 -> "10,000". */
export function formatCount(n: number): string {
  return grouped(n, 0);
}

/** A rate or ratio: whole above 10, one decimal below ("8,333", "2.5"). */
export function formatRate(n: number): string {
  return n >= 10 ? grouped(n, 0) : grouped(n, 1);
}

/** "0.4 s", "12 s", "3 min 20 s", "2 h 05 min": short enough for one line. */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return '?';
  if (seconds < 10) return `${grouped(seconds, 1)} s`;
  if (seconds < 60) return `${Math.round(seconds)} s`;
  const total = Math.round(seconds);
  if (total < 3600) return `${Math.floor(total / 60)} min ${total % 60} s`;
  const hours = Math.floor(total / 3600);
  return `${hours} h ${String(Math.floor((total % 3600) / 60)).padStart(2, '0')} min`;
}

/**
 * One line, the same shape for every run, so cron mail reads at a glance and grep finds it:
 * `map: 10,000 rows in 1.2 s (8,333 rows/s): 9,500 mapped, 200 optout, 290 invalid, 10 error; 3 requests, 0 retries, 0 x 429; 500 from state`
 */
export function formatSummary(s: RunSummary): string {
  const st = s.status;
  return (
    `${s.command}: ${formatCount(s.rows)} rows in ${formatDuration(s.duration_s)} (${formatRate(s.rows_per_s)} rows/s): ` +
    `${formatCount(st.mapped)} mapped, ${formatCount(st.optout)} optout, ${formatCount(st.invalid)} invalid, ${formatCount(st.error)} error` +
    `${st.missing ? `, ${formatCount(st.missing)} missing` : ''}; ` +
    `${plural(s.requests, 'request')}, ${plural(s.retries, 'retry', 'retries')}, ${formatCount(s.http_429)} x 429; ` +
    `${formatCount(s.from_state)} from state`
  );
}

function plural(n: number, one: string, many = `${one}s`): string {
  return `${formatCount(n)} ${n === 1 ? one : many}`;
}

/** The summary line; a JSON log gets the summary's figures as its `counts`. */
export function printSummary(summary: RunSummary, stream: { write(chunk: string): unknown } = process.stderr): void {
  writeLine(stream, formatSummary(summary), { counts: summary });
}

/** The --summary-json this process wrote last, so that the end of the run can add its exit code to it. */
let lastWritten: { path: string; body: Record<string, unknown> } | undefined;

/** What writeSummaryJson wrote to `path` in this process, if it did. */
export function summaryWrittenTo(path: string): Record<string, unknown> | undefined {
  return lastWritten !== undefined && lastWritten.path === path ? lastWritten.body : undefined;
}

/**
 * Writes the summary as JSON whole (a local file next to its final path, renamed into place; an s3:// object in one
 * PUT), so a reader (a cron wrapper, a dashboard) never sees half of it.
 */
export async function writeSummaryJson(path: string, summary: RunSummary | Record<string, unknown>): Promise<void> {
  await writeTextOutput(path, `${JSON.stringify(summary, null, 2)}\n`);
  lastWritten = { path, body: { ...summary } };
}
