import ora, { type Ora } from 'ora';
import { formatCount, formatDuration, formatRate } from './summary.js';

/** What the caller pushes; every field is a running total. */
export interface ProgressCounters {
  done: number;
  total?: number;
  /** The total is a guess (e.g. from the file size), so it is shown with `~` and dropped once passed. */
  totalIsEstimate?: boolean;
  retries?: number;
  http429?: number;
}

export interface ProgressReporter {
  /** Records counters; costs an assignment, so it may be called per row. Rendering runs on a timer. */
  update(counters: Partial<ProgressCounters>): void;
  /** One line of information for the user, kept clear of the spinner; nothing with --quiet. */
  note(line: string): void;
  /** Stops the timer and clears the spinner line. Safe to call twice. */
  stop(): void;
  readonly mode: ProgressMode;
}

/** spinner: ora on a terminal; lines: a plain line every interval (logs, cron); off: --quiet. */
export type ProgressMode = 'spinner' | 'lines' | 'off';

interface ProgressStream {
  write(chunk: string): unknown;
  isTTY?: boolean;
}

export interface Timers {
  setInterval(fn: () => void, ms: number): unknown;
  clearInterval(handle: unknown): void;
}

export interface ProgressOptions {
  /** Names the run in every line: `map`, `remap-due`, ... */
  label: string;
  /** Default process.stderr. */
  stream?: ProgressStream;
  quiet?: boolean;
  env?: NodeJS.ProcessEnv;
  /** Rows are written to stdout: a spinner would have to redraw around every write there, so use lines. */
  dataOnStdout?: boolean;
  stdoutIsTTY?: boolean;
  /** Plain-line period (default 10 s). */
  lineIntervalMs?: number;
  /** Spinner text refresh (default 250 ms). */
  spinnerIntervalMs?: number;
  now?: () => number;
  timers?: Timers;
}

export function chooseProgressMode(o: Pick<ProgressOptions, 'stream' | 'quiet' | 'env' | 'dataOnStdout' | 'stdoutIsTTY'>): ProgressMode {
  if (o.quiet) return 'off';
  const stream = o.stream ?? process.stderr;
  const env = o.env ?? process.env;
  if (!stream.isTTY || env.TERM === 'dumb') return 'lines';
  if (o.dataOnStdout && (o.stdoutIsTTY ?? process.stdout.isTTY)) return 'lines';
  return 'spinner';
}

/** NO_COLOR (https://no-color.org) is set to anything non-empty, or --no-color was given. */
export function colorDisabled(env: NodeJS.ProcessEnv = process.env): boolean {
  return (env.NO_COLOR ?? '') !== '' || env.TERM === 'dumb';
}

/** Smooths the rate over about this long, so an ETA neither jumps per batch nor lags minutes behind. */
const RATE_TIME_CONSTANT_S = 5;

export interface ProgressSnapshot extends ProgressCounters {
  rowsPerS: number;
}

/** "12,345/~100,000 rows (12.3%) · 8,333 rows/s · ETA 11 s · 2 retries · 0 x 429" */
export function formatProgress(label: string, s: ProgressSnapshot, separator: string): string {
  const parts: string[] = [];
  const total = s.total !== undefined && !(s.totalIsEstimate && s.done >= s.total) ? s.total : undefined;
  if (total !== undefined && total > 0) {
    const pct = Math.min(100, (s.done / total) * 100);
    parts.push(`${formatCount(s.done)}/${s.totalIsEstimate ? '~' : ''}${formatCount(total)} rows (${pct.toFixed(1)}%)`);
  } else {
    parts.push(`${formatCount(s.done)} rows`);
  }
  parts.push(`${formatRate(s.rowsPerS)} rows/s`);
  if (total !== undefined && s.rowsPerS > 0 && total > s.done) parts.push(`ETA ${formatDuration((total - s.done) / s.rowsPerS)}`);
  parts.push(`${formatCount(s.retries ?? 0)} retries`, `${formatCount(s.http429 ?? 0)} x 429`);
  return `${label}: ${parts.join(separator)}`;
}

export function createProgress(options: ProgressOptions): ProgressReporter {
  const mode = chooseProgressMode(options);
  const stream = options.stream ?? process.stderr;
  const now = options.now ?? Date.now;
  const timers: Timers = options.timers ?? {
    setInterval: (fn, ms) => setInterval(fn, ms).unref(),
    clearInterval: (h) => clearInterval(h as NodeJS.Timeout),
  };
  const counters: ProgressCounters = { done: 0, retries: 0, http429: 0 };
  let lastAt = now();
  let lastDone = 0;
  let rate: number | undefined;
  let stopped = false;

  const snapshot = (): ProgressSnapshot => {
    const t = now();
    const dt = (t - lastAt) / 1000;
    if (dt > 0) {
      const instant = Math.max(0, counters.done - lastDone) / dt;
      rate = rate === undefined ? instant : rate + (instant - rate) * (1 - Math.exp(-dt / RATE_TIME_CONSTANT_S));
      lastAt = t;
      lastDone = counters.done;
    }
    return { ...counters, rowsPerS: rate ?? 0 };
  };

  if (mode === 'off') {
    return { mode, update: () => {}, note: () => {}, stop: () => {} };
  }

  let spinner: Ora | undefined;
  let handle: unknown;
  if (mode === 'spinner') {
    spinner = ora({
      stream: stream as NodeJS.WritableStream,
      text: `${options.label}: starting`,
      isEnabled: true,
      color: colorDisabled(options.env) ? false : 'cyan',
      // ora would otherwise put stdin in raw mode, which breaks reading rows from stdin and Ctrl-C.
      discardStdin: false,
    }).start();
    handle = timers.setInterval(() => {
      if (!spinner) return;
      spinner.text = formatProgress(options.label, snapshot(), ' · ');
      spinner.render();
    }, options.spinnerIntervalMs ?? 250);
  } else {
    handle = timers.setInterval(() => {
      stream.write(`${formatProgress(options.label, snapshot(), ', ')}\n`);
    }, options.lineIntervalMs ?? 10_000);
  }

  return {
    mode,
    update(c) {
      if (c.done !== undefined) counters.done = c.done;
      if (c.total !== undefined) counters.total = c.total;
      if (c.totalIsEstimate !== undefined) counters.totalIsEstimate = c.totalIsEstimate;
      if (c.retries !== undefined) counters.retries = c.retries;
      if (c.http429 !== undefined) counters.http429 = c.http429;
    },
    note(line) {
      // While spinning, ora hooks the stream's write: it clears the spinner line, writes, and redraws.
      stream.write(`${line}\n`);
    },
    stop() {
      if (stopped) return;
      stopped = true;
      timers.clearInterval(handle);
      spinner?.stop();
    },
  };
}
