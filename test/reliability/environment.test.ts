// Environment faults (the places the tool runs): terminals nobody sized, a dumb terminal, a terminal closed mid-run,
// SIGTERM and SIGHUP mid-run, and a proxy between the tool and the service. After each, a re-run with the same
// --state must write the same bytes as an undisturbed run, and no temp file may be left behind.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import { emailRows, tempDir } from '../helpers/map-e2e-data.js';
import { runCli } from '../helpers/map-e2e-processes.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { ptyAvailable, runInPty, type PtyRun } from '../helpers/pty-run.js';
import { recordWhenPassed } from './results.js';

const dir = tempDir('reliability-environment');
let input = '';
let reference = '';
const figures = { environment_faults: 0, outputs_compared: 0, rows_lost: 0, temp_files_left: 0 };

const tempFiles = (): string[] => readdirSync(dir.path).filter((n) => n.endsWith('.tmp'));
const rowsOf = (text: string): number => text.split('\n').filter((l) => l.length > 0).length;

beforeAll(async () => {
  ensureBuilt();
  input = dir.file('input.csv', emailRows(200_000));
  const out = join(dir.path, 'reference.csv');
  const r = await runCli(['map', input, '--env', 'local', '-q', '-o', out]);
  expect(r.code, r.stderr).toBe(0);
  reference = readFileSync(out, 'utf8');
}, 180_000);

afterAll(() => dir.remove());

/** Checks the run's output after the fault (and a resuming re-run if it stopped) against the undisturbed one. */
async function expectSameOutput(name: string, out: string, state: string): Promise<void> {
  figures.temp_files_left += tempFiles().length;
  expect(tempFiles()).toEqual([]);
  if (!existsSync(out)) {
    const again = await runCli(['map', input, '--env', 'local', '-q', '--state', state, '-o', out]);
    expect(again.code, again.stderr).toBe(0);
  }
  const written = readFileSync(out, 'utf8');
  figures.outputs_compared++;
  figures.rows_lost += Math.max(0, rowsOf(reference) - rowsOf(written));
  expect(written, name).toBe(reference);
}

describe.skipIf(!ptyAvailable())('terminals and signals, then a re-run', () => {
  const cases: { name: string; run: Omit<PtyRun, 'args'>; stops: boolean }[] = [
    { name: '0 x 0 terminal', run: { cols: 0, rows: 0 }, stops: false },
    { name: '80 x 0 terminal', run: { cols: 80, rows: 0 }, stops: false },
    { name: 'dumb terminal', run: { cols: 80, rows: 24, env: { TERM: 'dumb' } }, stops: false },
    {
      name: 'SIGTERM mid-run',
      run: { cols: 80, rows: 24, action: 'SIGTERM', afterText: "using column 'email'", afterMs: 300 },
      stops: true,
    },
    {
      name: 'SIGHUP mid-run',
      run: { cols: 80, rows: 24, action: 'SIGHUP', afterText: "using column 'email'", afterMs: 300 },
      stops: true,
    },
    {
      name: 'terminal closed mid-run',
      run: { cols: 0, rows: 0, action: 'close', afterText: "using column 'email'", afterMs: 300 },
      stops: true,
    },
  ];
  for (const c of cases) {
    it(`${c.name}: ends in bounded time; the output (after a re-run) is the undisturbed one`, async () => {
      const slug = c.name.replace(/[^a-z0-9]+/gi, '-');
      const out = join(dir.path, `${slug}.csv`);
      const state = join(dir.path, `${slug}.db`);
      const r = await runInPty({
        ...c.run,
        args: [
          'map',
          input,
          '--env',
          'local',
          '--state',
          state,
          '-o',
          out,
          '--batch-size',
          '500',
          '--concurrency',
          '2',
        ],
        limitSeconds: 120,
      });
      figures.environment_faults++;
      expect(r.killed_for).toBeNull();
      if (!c.stops) expect(r.exit_code).toBe(0);
      // a fault that stops the run must have hit it mid-run: nothing written yet
      else expect(existsSync(out)).toBe(false);
      await expectSameOutput(c.name, out, state);
    }, 240_000);
  }
});

describe('through a proxy', () => {
  let proxy: ProxyProcess | undefined;
  afterAll(async () => {
    await proxy?.stop();
  });

  it('every request goes through the proxy and the output is the undisturbed one', async () => {
    proxy = await startProxyProcess();
    const out = join(dir.path, 'proxied.csv');
    const state = join(dir.path, 'proxied.db');
    const r = await runCli(['map', input, '--env', 'local', '-q', '--state', state, '--proxy', proxy.url, '-o', out]);
    figures.environment_faults++;
    expect(r.code, r.stderr).toBe(0);
    await proxy.flush();
    expect(proxy.log.filter((e) => e.target.endsWith('/v3/identity/map')).length).toBeGreaterThan(0);
    await expectSameOutput('proxy', out, state);
  }, 240_000);
});

recordWhenPassed('environment', () => figures);
