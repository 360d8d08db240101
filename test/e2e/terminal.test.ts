import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, ROOT } from '../helpers/map-e2e-build.js';
import { emailRows, tempDir } from '../helpers/map-e2e-data.js';
import { runCli } from '../helpers/map-e2e-processes.js';
import { ptyAvailable, runInPty } from '../helpers/pty-run.js';

// The CLI in real pseudo-terminals: sizes containers and scripts give (0 x 0), a dumb terminal, a closed one,
// and the signals that end a run. Every run is bounded in time and bytes by the driver.

const SAMPLE = join(ROOT, 'samples', 'customers.csv');
const dir = tempDir('terminal');
/** Long enough to be mid-run when a signal comes, even on a fast machine. */
let big = '';

const leftovers = (): string[] => readdirSync(dir.path).filter((n) => n.endsWith('.tmp'));

beforeAll(() => {
  ensureBuilt();
  big = dir.file('big.csv', emailRows(400_000));
}, 120_000);
afterAll(() => dir.remove());

describe.skipIf(!ptyAvailable())('a terminal of any size', () => {
  for (const [cols, rows] of [
    [0, 0],
    [0, 24],
    [80, 0],
    [5, 24],
  ] as const) {
    it(`finishes map on a ${cols} x ${rows} terminal in bounded time and bytes`, async () => {
      const out = join(dir.path, `sized-${cols}x${rows}.csv`);
      const r = await runInPty({
        cols,
        rows,
        args: ['map', SAMPLE, '--env', 'local', '-o', out],
        limitSeconds: 30,
        limitBytes: 200_000,
      });
      expect(r.killed_for).toBeNull();
      expect(r.exit_code).toBe(0);
      expect(r.bytes).toBeLessThan(20_000);
      expect(r.tail).toContain('map: 3,000 rows');
      expect(existsSync(out)).toBe(true);
      expect(leftovers()).toEqual([]);
    });
  }

  it('draws the spinner on a sized terminal, and plain text on a dumb one', async () => {
    const sized = await runInPty({
      cols: 100,
      rows: 30,
      args: ['map', SAMPLE, '--env', 'local', '-o', join(dir.path, 'sized.csv')],
    });
    expect(sized.exit_code).toBe(0);
    expect(sized.tail).toContain('\u001b[?25l');
    const dumb = await runInPty({
      cols: 100,
      rows: 30,
      env: { TERM: 'dumb' },
      args: ['map', SAMPLE, '--env', 'local', '-o', join(dir.path, 'dumb.csv')],
    });
    expect(dumb.exit_code).toBe(0);
    expect(dumb.tail).not.toContain('\u001b[');
    expect(dumb.tail).toContain('map: 3,000 rows');
  });
});

describe.skipIf(!ptyAvailable())('signals end a run as Ctrl-C does', () => {
  const cases = [
    { action: 'SIGINT', exit: 130 },
    { action: 'SIGTERM', exit: 130 },
  ] as const;
  for (const c of cases) {
    it(`${c.action}: exit ${c.exit}, output not written, no temp file`, async () => {
      const out = join(dir.path, `${c.action}.csv`);
      const r = await runInPty({
        cols: 0,
        rows: 0,
        args: ['map', big, '--env', 'local', '-o', out, '--batch-size', '500', '--concurrency', '1'],
        action: c.action,
        afterText: "using column 'email'",
        afterMs: 300,
      });
      expect(r.killed_for).toBeNull();
      expect(r.exit_code).toBe(c.exit);
      expect(r.tail).toContain('interrupted');
      expect(existsSync(out)).toBe(false);
      expect(leftovers()).toEqual([]);
    });
  }

  it('SIGHUP: ends as the signal does (129 in a shell), output not written, no temp file', async () => {
    const out = join(dir.path, 'hup.csv');
    const r = await runInPty({
      cols: 80,
      rows: 24,
      args: ['map', big, '--env', 'local', '-o', out, '--batch-size', '500', '--concurrency', '1'],
      action: 'SIGHUP',
      afterText: "using column 'email'",
      afterMs: 300,
    });
    expect(r.killed_for).toBeNull();
    expect(r.signal).toBe(1);
    expect(r.tail).toContain('interrupted');
    expect(existsSync(out)).toBe(false);
    expect(leftovers()).toEqual([]);
  });

  it('a closed terminal (an ssh session dropped) ends the run: no spinning on, no temp file', async () => {
    const out = join(dir.path, 'closed.csv');
    const r = await runInPty({
      cols: 0,
      rows: 0,
      args: ['map', big, '--env', 'local', '-o', out, '--batch-size', '500', '--concurrency', '1'],
      action: 'close',
      afterText: "using column 'email'",
      afterMs: 300,
    });
    expect(r.killed_for).toBeNull();
    expect(r.signal).toBe(1);
    expect(existsSync(out)).toBe(false);
    expect(leftovers()).toEqual([]);
  });
});

describe('no terminal at all', () => {
  it('writes plain lines, no control sequences', async () => {
    const r = await runCli(['map', SAMPLE, '--env', 'local', '-o', join(dir.path, 'piped.csv')]);
    expect(r.code).toBe(0);
    expect(r.stderr).not.toContain('\u001b[');
    expect(r.stderr).toContain('map: 3,000 rows');
  });
});
