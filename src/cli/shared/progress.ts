import type { Ora } from 'ora';
import { writeLine } from '../../pipeline/run/log-lines.js';
import type { ProgressCounters } from '../../pipeline/run/run-deps.js';
import { formatCount, formatDuration, formatRate } from '../../pipeline/run/summary.js';

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
  /** A terminal's window size; 0 when the terminal reports none (a pseudo-terminal nobody sized). */
  columns?: number;
  rows?: number;
  on?(event: string, listener: (...args: unknown[]) => void): unknown;
  off?(event: string, listener: (...args: unknown[]) => void): unknown;
}

/** Narrower than this, the spinner's line cannot say anything useful: plain lines instead. */
export const MIN_SPINNER_COLUMNS = 20;

/**
 * Whether a terminal's window can hold the spinner line. A size the stream does not report (undefined) is
 * taken as fitting, as ora does; a reported 0 (no window size, as `docker run -t` can give) is not.
 */
export function terminalFits(stream: Pick<ProgressStream, 'columns' | 'rows'>): boolean {
  const { columns, rows } = stream;
  if (columns !== undefined && !(columns >= MIN_SPINNER_COLUMNS)) return false;
  if (rows !== undefined && !(rows >= 1)) return false;
  return true;
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

export function chooseProgressMode(
  o: Pick<ProgressOptions, 'stream' | 'quiet' | 'env' | 'dataOnStdout' | 'stdoutIsTTY'>,
): ProgressMode {
  if (o.quiet) return 'off';
  const stream = o.stream ?? process.stderr;
  const env = o.env ?? process.env;
  if (!stream.isTTY || env.TERM === 'dumb' || !terminalFits(stream)) return 'lines';
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
  if (total !== undefined && s.rowsPerS > 0 && total > s.done)
    parts.push(`ETA ${formatDuration((total - s.done) / s.rowsPerS)}`);
  parts.push(`${formatCount(s.retries ?? 0)} retries`, `${formatCount(s.http429 ?? 0)} x 429`);
  return `${label}: ${parts.join(separator)}`;
}

/** A progress line's figures for a JSON log, named as the summary names them. */
export function progressCounts(s: ProgressSnapshot): Record<string, number | boolean> {
  return {
    rows: s.done,
    ...(s.total !== undefined ? { rows_total: s.total } : {}),
    ...(s.totalIsEstimate === true ? { rows_total_estimated: true } : {}),
    rows_per_s: Math.round(s.rowsPerS),
    retries: s.retries ?? 0,
    http_429: s.http429 ?? 0,
  };
}

/** Columns ora assumes when the stream's are unusable: one line per frame, so clearing it stays one line. */
const FALLBACK_COLUMNS = 80;

/** What ora calls on its stream. */
interface TerminalStream extends ProgressStream {
  write(chunk: string, ...rest: unknown[]): unknown;
  cursorTo?(x: number, ...rest: unknown[]): unknown;
  moveCursor?(dx: number, dy: number, ...rest: unknown[]): unknown;
  clearLine?(dir: number, ...rest: unknown[]): unknown;
  once?(event: string, listener: (...args: unknown[]) => void): unknown;
  removeListener?(event: string, listener: (...args: unknown[]) => void): unknown;
}

/**
 * The terminal as ora sees it. ora divides by the column count to know how many lines to clear, and a
 * terminal that reports 0 columns made that Infinity: it then wrote cursor-up sequences for ever. Here the
 * column count is never below MIN_SPINNER_COLUMNS, whatever the terminal says or becomes.
 */
function spinnerView(real: TerminalStream): TerminalStream {
  return {
    isTTY: true,
    get columns() {
      const c = real.columns;
      return c !== undefined && c >= MIN_SPINNER_COLUMNS ? c : FALLBACK_COLUMNS;
    },
    get rows() {
      return real.rows;
    },
    write: (chunk, ...rest) => real.write(chunk, ...rest),
    cursorTo: (x, ...rest) => real.cursorTo?.(x, ...rest),
    moveCursor: (dx, dy, ...rest) => real.moveCursor?.(dx, dy, ...rest),
    clearLine: (dir, ...rest) => real.clearLine?.(dir, ...rest),
    on: (event, listener) => real.on?.(event, listener),
    once: (event, listener) => real.once?.(event, listener),
    off: (event, listener) => real.off?.(event, listener),
    removeListener: (event, listener) => (real.removeListener ?? real.off)?.call(real, event, listener),
  };
}

/** Cuts the spinner text so that the spinner's line never wraps: clearing it is then always one line. */
export function fitToWidth(text: string, columns: number | undefined): string {
  if (columns === undefined || columns < MIN_SPINNER_COLUMNS) return text;
  // the spinner glyph and a space come first; the last column stays free so the terminal does not wrap
  const room = columns - 3;
  const chars = Array.from(text);
  return chars.length <= room ? text : `${chars.slice(0, room - 1).join('')}…`;
}

/** ora, once loadSpinner has loaded it. */
let ora: typeof import('ora').default | undefined;

/**
 * Loads ora, the spinner, for a run whose progress goes to `stream`, when that is a terminal: ora and what it
 * imports are a good part of the CLI's start-up, which a run in a pipe, a log or cron would pay for nothing.
 */
export async function loadSpinner(stream: object): Promise<void> {
  if ((stream as ProgressStream).isTTY === true && ora === undefined) ora = (await import('ora')).default;
}

/** Progress on `options.stream`; a spinner there needs loadSpinner to have run (else plain lines are written). */
export function createProgress(options: ProgressOptions): ProgressReporter {
  let mode = chooseProgressMode(options);
  if (mode === 'spinner' && ora === undefined) mode = 'lines';
  const stream = (options.stream ?? process.stderr) as TerminalStream;
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

  const startLines = (): void => {
    handle = timers.setInterval(() => {
      const s = snapshot();
      writeLine(stream, formatProgress(options.label, s, ', '), { counts: progressCounts(s) });
    }, options.lineIntervalMs ?? 10_000);
  };

  const startSpinner = (): void => {
    // createProgress chose the spinner only with ora loaded
    spinner = (ora as NonNullable<typeof ora>)({
      stream: spinnerView(stream) as unknown as NodeJS.WritableStream,
      text: `${options.label}: starting`,
      isEnabled: true,
      color: colorDisabled(options.env) ? false : 'cyan',
      // ora would otherwise put stdin in raw mode, which breaks reading rows from stdin and Ctrl-C.
      discardStdin: false,
    }).start();
    handle = timers.setInterval(() => {
      if (!spinner) return;
      spinner.text = fitToWidth(formatProgress(options.label, snapshot(), ' · '), stream.columns);
      spinner.render();
    }, options.spinnerIntervalMs ?? 250);
  };

  const stopDrawing = (): void => {
    timers.clearInterval(handle);
    spinner?.stop();
    spinner = undefined;
  };

  // The window shrank below a usable size (or lost its size): the spinner gives way to plain lines.
  const onResize = (): void => {
    if (stopped || mode !== 'spinner' || terminalFits(stream)) return;
    stopDrawing();
    mode = 'lines';
    startLines();
  };
  // The terminal went away (a closed ssh session gives EIO): nothing can be shown any more, so draw nothing.
  const onStreamError = (): void => {
    if (stopped) return;
    stopDrawing();
    mode = 'off';
  };

  if (mode === 'spinner') startSpinner();
  else startLines();
  stream.on?.('resize', onResize);
  stream.on?.('error', onStreamError);

  return {
    get mode() {
      return mode;
    },
    update(c) {
      if (c.done !== undefined) counters.done = c.done;
      if (c.total !== undefined) counters.total = c.total;
      if (c.totalIsEstimate !== undefined) counters.totalIsEstimate = c.totalIsEstimate;
      if (c.retries !== undefined) counters.retries = c.retries;
      if (c.http429 !== undefined) counters.http429 = c.http429;
    },
    note(line) {
      if (mode === 'off') return;
      // While spinning, ora hooks the stream's write: it clears the spinner line, writes, and redraws.
      stream.write(`${line}\n`);
    },
    stop() {
      if (stopped) return;
      stopped = true;
      stopDrawing();
      stream.off?.('resize', onResize);
      stream.off?.('error', onStreamError);
    },
  };
}
