import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { lockPathOf } from '../../src/state/lock.js';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, startServe, type ServeProcess } from '../helpers/map-e2e-processes.js';
import {
  describeEnd,
  entriesText,
  inspectState,
  killPoints,
  leftovers,
  MAP_PATH,
  requireBuilt,
  runAndKill,
  scaled,
  serveEnv,
  stackLines,
  statsOf,
  tempDir,
  type StoredEntry,
} from './harness.js';
import { recordWhenPassed } from './results.js';

/**
 * Crashes of `map --state`: SIGKILL and SIGINT at seeded points of a run against `serve` (each answer delayed a
 * little, so that requests are in flight when the signal lands), then the same command again. The state must be
 * intact (PRAGMA integrity_check, no entry other than what an answer said), no output file may look complete, the
 * re-run must send exactly what was not committed, and its output must equal an undisturbed run's.
 */

const ROWS = scaled(10_000);
const POINTS = scaled(10);
const BATCH = 250;
const SEED = 0x6d6170;

const dir = tempDir('crash-map');
let serve: ServeProcess;
let input: string;
let baseline: { output: string; entries: Map<string, StoredEntry>; sent: number; requests: number };
const figures = {
  crashes: 0,
  sigkill: 0,
  sigint: 0,
  outputs_compared: 0,
  rows_compared: 0,
  rows_lost: 0,
  items_resent: 0,
  entries_committed_before_crash: 0,
};

function inputCsv(n: number): string {
  const lines = ['id,email,phone'];
  for (let i = 0; i < n; i++) {
    const email =
      i % 61 === 60 ? `invalid-${i}` : i % 89 === 88 ? `crash.${i - 80}@example.com` : `crash.${i}@example.com`;
    const phone = i % 3 === 0 ? `+1650${String(3_000_000 + i).slice(-7)}` : '';
    lines.push(`${i},${email},${phone}`);
  }
  return `${lines.join('\n')}\n`;
}

function args(out: string, state: string): string[] {
  return [
    'map',
    input,
    '--email-col',
    'email',
    '--phone-col',
    'phone',
    '--batch-size',
    String(BATCH),
    '--concurrency',
    '4',
    '--state',
    state,
    '-o',
    out,
    '-q',
  ];
}

const sentOn = async (): Promise<{ items: number; requests: number }> => {
  const s = await statsOf(serve.url);
  return { items: s.items[MAP_PATH] ?? 0, requests: s.requests[MAP_PATH] ?? 0 };
};

recordWhenPassed('crash_map', () => figures);

beforeAll(async () => {
  requireBuilt();
  serve = await startServe(['--seed', 'reliability-crash-map', '--latency-ms', '25']);
  input = dir.file('input.csv', inputCsv(ROWS));
  const out = dir.file('baseline.csv');
  const state = dir.file('baseline.db');
  const before = await sentOn();
  const res = await runCli(args(out, state), { env: serveEnv(serve) });
  expect(res.code, res.stderr).toBe(0);
  const after = await sentOn();
  const report = inspectState(state);
  baseline = {
    output: readFileSync(out, 'utf8'),
    entries: report.entries,
    sent: after.items - before.items,
    requests: after.requests - before.requests,
  };
  expect(baseline.sent).toBe(report.entries.size);
  expect(baseline.requests).toBeGreaterThan(20);
}, 120_000);

afterAll(async () => {
  await serve?.stop();
  dir.remove();
});

describe(`map --state killed at ${POINTS} seeded points, then run again`, () => {
  // and two SIGKILLs by the clock alone, while the process starts and creates the state file
  const points = [
    ...killPoints(SEED, POINTS, 24, 30),
    { signal: 'SIGKILL' as const, afterRequests: 0, delayMs: 120 },
    { signal: 'SIGKILL' as const, afterRequests: 0, delayMs: 260 },
  ];
  points.forEach((point, i) => {
    it(`#${i + 1}: ${point.signal} after ${point.afterRequests} request(s) + ${point.delayMs} ms`, async () => {
      const runDir = join(dir.path, `point-${i + 1}`);
      mkdirSync(runDir);
      const out = join(runDir, 'mapped.csv');
      const state = join(runDir, 'state.db');
      const env = serveEnv(serve);

      const killed = await runAndKill(args(out, state), env, serve.url, MAP_PATH, point);
      expect(
        killed.killed,
        `the run ended on its own (${describeEnd(killed)}) before the kill point\n${killed.stderr}`,
      ).toBe(true);
      expect(stackLines(killed.stderr)).toEqual([]);
      figures.crashes++;
      if (point.signal === 'SIGKILL') {
        figures.sigkill++;
        expect(killed.signal).toBe('SIGKILL');
      } else {
        figures.sigint++;
        expect(killed.code, killed.stderr).toBe(130);
        expect(killed.stderr).toMatch(/interrupted/);
      }
      // no output that looks complete: no target file; at most the temp file of a killed process
      expect(existsSync(out)).toBe(false);
      const left = leftovers(runDir, [
        'state.db',
        'state.db-wal',
        'state.db-shm',
        basename(lockPathOf(join(runDir, 'state.db'))),
      ]);
      if (point.signal === 'SIGINT') expect(left).toEqual([]);
      // and SQLite's rollback journal of a kill while a new file is switched to WAL (the next open rolls it back)
      else for (const name of left) expect(name).toMatch(/^(\.mapped\.csv\.\d+\.tmp|state\.db-journal)$/);

      // the state: intact, and every entry in it is what the service answered (a kill before the file exists
      // leaves none, which is as good)
      const report = existsSync(state)
        ? inspectState(state)
        : {
            integrity: 'ok',
            halfWritten: [],
            entries: new Map<string, StoredEntry>(),
            runs: [{ command: 'map', finished: false, exitCode: null }],
          };
      expect(report.integrity).toBe('ok');
      expect(report.halfWritten).toEqual([]);
      const unlike = [...report.entries].filter(
        ([key, entry]) => JSON.stringify(entry) !== JSON.stringify(baseline.entries.get(key)),
      );
      expect(unlike.slice(0, 5)).toEqual([]);
      figures.entries_committed_before_crash += report.entries.size;
      expect(report.runs.length).toBeLessThanOrEqual(1);
      if (report.runs.length === 1) expect(report.runs[0]!.finished).toBe(point.signal === 'SIGINT');

      // the same command again: only what was not committed is sent, and the output is the undisturbed one
      const before = await sentOn();
      const again = await runCli(args(out, state), { env });
      expect(again.code, again.stderr).toBe(0);
      const sent = (await sentOn()).items - before.items;
      figures.items_resent += Math.max(0, sent - (baseline.sent - report.entries.size));
      expect(sent).toBe(baseline.sent - report.entries.size);
      const output = readFileSync(out, 'utf8');
      figures.outputs_compared++;
      figures.rows_compared += ROWS;
      if (output !== baseline.output)
        figures.rows_lost += output.split('\n').filter((line, k) => line !== baseline.output.split('\n')[k]).length;
      expect(output).toBe(baseline.output);
      const final = inspectState(state);
      expect(final.integrity).toBe('ok');
      expect(entriesText(final.entries)).toEqual(entriesText(baseline.entries));
    }, 120_000);
  });
});
