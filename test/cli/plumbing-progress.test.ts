import { beforeAll, describe, expect, it } from 'vitest';
import { EventEmitter } from 'node:events';
import {
  chooseProgressMode,
  colorDisabled,
  createProgress,
  fitToWidth,
  formatProgress,
  loadSpinner,
  terminalFits,
  type Timers,
} from '../../src/cli/shared/progress.js';

// the CLI loads the spinner before a run whose stderr is a terminal; these tests' terminals are fakes
beforeAll(() => loadSpinner({ isTTY: true }));

/** A clock and an interval the test drives by hand. */
function fakeTime() {
  let t = 1_000_000;
  const ticks: { fn: () => void; ms: number; cleared: boolean }[] = [];
  const timers: Timers = {
    setInterval: (fn, ms) => {
      const entry = { fn, ms, cleared: false };
      ticks.push(entry);
      return entry;
    },
    clearInterval: (h) => {
      (h as { cleared: boolean }).cleared = true;
    },
  };
  return {
    now: () => t,
    timers,
    ticks,
    advance(ms: number) {
      t += ms;
      for (const e of ticks) if (!e.cleared) e.fn();
    },
  };
}

function fakeStream(isTTY: boolean) {
  const chunks: string[] = [];
  const cleared = { lines: 0 };
  return {
    chunks,
    cleared,
    stream: {
      isTTY,
      columns: 120,
      write: (s: string) => {
        chunks.push(String(s));
        return true;
      },
      cursorTo: () => true,
      moveCursor: () => true,
      clearLine: () => {
        cleared.lines += 1;
        return true;
      },
      on: () => undefined,
      once: () => undefined,
      removeListener: () => undefined,
    },
  };
}

describe('progress mode', () => {
  it('uses a spinner only on a terminal that is not dumb, and nothing with --quiet', () => {
    const tty = { isTTY: true, write: () => true };
    const pipe = { isTTY: false, write: () => true };
    expect(chooseProgressMode({ stream: tty, env: {} })).toBe('spinner');
    expect(chooseProgressMode({ stream: pipe, env: {} })).toBe('lines');
    expect(chooseProgressMode({ stream: tty, env: { TERM: 'dumb' } })).toBe('lines');
    expect(chooseProgressMode({ stream: tty, env: {}, quiet: true })).toBe('off');
    expect(chooseProgressMode({ stream: tty, env: {}, dataOnStdout: true, stdoutIsTTY: true })).toBe('lines');
    expect(chooseProgressMode({ stream: tty, env: {}, dataOnStdout: true, stdoutIsTTY: false })).toBe('spinner');
  });

  it('honours NO_COLOR when it is non-empty', () => {
    expect(colorDisabled({ NO_COLOR: '1' })).toBe(true);
    expect(colorDisabled({ NO_COLOR: '' })).toBe(false);
    expect(colorDisabled({})).toBe(false);
    expect(colorDisabled({ TERM: 'dumb' })).toBe(true);
  });
});

describe('formatProgress', () => {
  it('shows done/total, rate, ETA, retries and 429s', () => {
    expect(
      formatProgress('map', { done: 25_000, total: 100_000, rowsPerS: 5_000, retries: 2, http429: 1 }, ' · '),
    ).toBe('map: 25,000/100,000 rows (25.0%) · 5,000 rows/s · ETA 15 s · 2 retries · 1 x 429');
  });

  it('marks an estimated total and drops it once passed', () => {
    expect(formatProgress('map', { done: 10, total: 1_000, totalIsEstimate: true, rowsPerS: 2.5 }, ', ')).toBe(
      'map: 10/~1,000 rows (1.0%), 2.5 rows/s, ETA 6 min 36 s, 0 retries, 0 x 429',
    );
    expect(formatProgress('map', { done: 1_200, total: 1_000, totalIsEstimate: true, rowsPerS: 100 }, ', ')).toBe(
      'map: 1,200 rows, 100 rows/s, 0 retries, 0 x 429',
    );
  });
});

describe('plain lines when stderr is not a terminal', () => {
  it('writes one line per interval with the counters pushed since', () => {
    const clock = fakeTime();
    const { stream, chunks } = fakeStream(false);
    const p = createProgress({ label: 'map', stream, env: {}, now: clock.now, timers: clock.timers });
    expect(p.mode).toBe('lines');
    expect(clock.ticks[0].ms).toBe(10_000);
    p.update({ done: 0, total: 200_000 });
    for (let i = 1; i <= 50_000; i++) p.update({ done: i });
    p.update({ retries: 3, http429: 2 });
    expect(chunks).toEqual([]);
    clock.advance(10_000);
    expect(chunks).toEqual(['map: 50,000/200,000 rows (25.0%), 5,000 rows/s, ETA 30 s, 3 retries, 2 x 429\n']);
    p.update({ done: 150_000 });
    clock.advance(10_000);
    expect(chunks).toHaveLength(2);
    // 100,000 rows in 10 s pulls the smoothed rate from 5,000 towards 10,000 by 1 - e^-2
    expect(chunks[1]).toBe('map: 150,000/200,000 rows (75.0%), 9,323 rows/s, ETA 5.4 s, 3 retries, 2 x 429\n');
    p.stop();
    clock.advance(10_000);
    expect(chunks).toHaveLength(2);
    p.stop();
  });

  it('passes notes through', () => {
    const clock = fakeTime();
    const { stream, chunks } = fakeStream(false);
    const p = createProgress({
      label: 'map',
      stream,
      env: {},
      now: clock.now,
      timers: clock.timers,
      lineIntervalMs: 1_000,
    });
    p.note('using column "email" (detected)');
    expect(chunks).toEqual(['using column "email" (detected)\n']);
    expect(clock.ticks[0].ms).toBe(1_000);
    p.stop();
  });

  it('says nothing at all with --quiet', () => {
    const clock = fakeTime();
    const { stream, chunks } = fakeStream(false);
    const p = createProgress({ label: 'map', stream, env: {}, quiet: true, now: clock.now, timers: clock.timers });
    p.update({ done: 5, total: 10 });
    p.note('hello');
    clock.advance(60_000);
    p.stop();
    expect(p.mode).toBe('off');
    expect(chunks).toEqual([]);
    expect(clock.ticks).toEqual([]);
  });
});

describe('spinner on a terminal', () => {
  it('shows the counters in the spinner text and clears it on stop', () => {
    const clock = fakeTime();
    const { stream, chunks, cleared } = fakeStream(true);
    const p = createProgress({ label: 'map', stream, env: { NO_COLOR: '1' }, now: clock.now, timers: clock.timers });
    expect(p.mode).toBe('spinner');
    p.update({ done: 500, total: 1_000 });
    clock.advance(1_000);
    const clearedBeforeStop = cleared.lines;
    p.stop();
    expect(cleared.lines).toBeGreaterThan(clearedBeforeStop);
    const all = chunks.join('');
    expect(all).toContain('map: 500/1,000 rows (50.0%)');
    expect(all.endsWith('\u001b[?25h')).toBe(true);
    expect(clock.ticks.every((t) => t.cleared)).toBe(true);
  });
});

describe('terminals of any size', () => {
  it('draws a spinner only in a window that can hold its line', () => {
    expect(terminalFits({ columns: 80, rows: 24 })).toBe(true);
    expect(terminalFits({})).toBe(true);
    expect(terminalFits({ columns: 0, rows: 0 })).toBe(false);
    expect(terminalFits({ columns: 0, rows: 24 })).toBe(false);
    expect(terminalFits({ columns: 80, rows: 0 })).toBe(false);
    expect(terminalFits({ columns: 19, rows: 24 })).toBe(false);
    expect(chooseProgressMode({ stream: { isTTY: true, columns: 0, rows: 0, write: () => true }, env: {} })).toBe(
      'lines',
    );
  });

  it('cuts the spinner text to one line of the window', () => {
    const text = 'map: 12,345/~100,000 rows (12.3%) · 8,333 rows/s · ETA 11 s · 2 retries · 0 x 429';
    expect(fitToWidth(text, 200)).toBe(text);
    const cut = fitToWidth(text, 40);
    expect(Array.from(cut)).toHaveLength(37);
    expect(cut.endsWith('…')).toBe(true);
    expect(fitToWidth(text, undefined)).toBe(text);
  });

  /** A terminal whose size can change, with ora's cursor calls counted. */
  function resizableTerminal(columns: number, rows: number) {
    const t = Object.assign(new EventEmitter(), {
      isTTY: true,
      columns,
      rows,
      chunks: [] as string[],
      clears: 0,
      write(s: string) {
        t.chunks.push(String(s));
        return true;
      },
      cursorTo: () => true,
      moveCursor: () => true,
      clearLine() {
        t.clears += 1;
        return true;
      },
    });
    return t;
  }

  it('gives way to plain lines when the window loses its size mid-run, and never clears more than its line', () => {
    const clock = fakeTime();
    const term = resizableTerminal(80, 24);
    const p = createProgress({
      label: 'map',
      stream: term,
      env: { NO_COLOR: '1' },
      now: clock.now,
      timers: clock.timers,
      lineIntervalMs: 1_000,
    });
    expect(p.mode).toBe('spinner');
    p.update({ done: 10 });
    clock.advance(250);
    term.columns = 0;
    term.rows = 0;
    term.emit('resize');
    expect(p.mode).toBe('lines');
    const before = term.clears;
    clock.advance(1_000);
    expect(term.clears).toBe(before);
    expect(term.chunks.at(-1)).toMatch(/^map: 10 rows, .*\n$/);
    p.stop();
    expect(term.listenerCount('resize')).toBe(0);
  });

  it('stops drawing when the terminal fails (it was closed)', () => {
    const clock = fakeTime();
    const term = resizableTerminal(80, 24);
    const p = createProgress({
      label: 'map',
      stream: term,
      env: { NO_COLOR: '1' },
      now: clock.now,
      timers: clock.timers,
    });
    term.emit('error', Object.assign(new Error('write EIO'), { code: 'EIO' }));
    expect(p.mode).toBe('off');
    const written = term.chunks.length;
    clock.advance(60_000);
    p.note('anything');
    expect(term.chunks.length).toBe(written);
    p.stop();
    expect(term.listenerCount('error')).toBe(0);
  });
});
