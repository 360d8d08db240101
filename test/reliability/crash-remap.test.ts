import { copyFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, startServe, type ServeProcess } from '../helpers/map-e2e-processes.js';
import {
  advanceClock,
  describeEnd,
  entriesText,
  inspectState,
  killPoints,
  leftoversBesideState,
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
 * Crashes of the nightly `remap-due`: a state of mapped entries, the service's clock moved 400 days (all due and
 * rotated), then remap-due killed (SIGKILL or SIGINT) at seeded points and run again. The state must be intact,
 * each entry either untouched or exactly as the undisturbed night left it, the re-run must send exactly the
 * entries still due, and the final state must equal the undisturbed night's. A run that does not complete writes
 * no changes file, whatever the signal (SIGINT and SIGTERM let the batches in flight commit first): the state
 * journals every committed change until a completed run's file holding it is in place, so the re-run's file holds
 * the whole night, each change exactly once, and the union of the two runs' files equals the undisturbed night's.
 */

const ENTRIES = scaled(30_000);
const POINTS = scaled(10);
const SEED = 0x72656d;

const dir = tempDir('crash-remap');
let serve: ServeProcess;
let template: string;
let nowS: number;
let initial: Map<string, StoredEntry>;
let baseline: { changes: string[]; header: string; entries: Map<string, StoredEntry>; sent: number };
const figures = {
  crashes: 0,
  sigkill: 0,
  sigint: 0,
  sigterm: 0,
  outputs_compared: 0,
  rows_compared: 0,
  rows_lost: 0,
  items_resent: 0,
  entries_committed_before_crash: 0,
  remap_changes_lost_after_sigkill: 0,
  rows_delivered_twice: 0,
};

function copyState(to: string): void {
  for (const suffix of ['', '-wal']) if (existsSync(template + suffix)) copyFileSync(template + suffix, to + suffix);
}

function args(state: string, out: string): string[] {
  return ['remap-due', '--state', state, '--now', String(nowS), '--concurrency', '2', '-o', out, '-q'];
}

function changeLines(path: string): string[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .slice(1);
}

const sentOn = async (): Promise<number> => (await statsOf(serve.url)).items[MAP_PATH] ?? 0;

recordWhenPassed('crash_remap_due', () => figures);

beforeAll(async () => {
  requireBuilt();
  // the latest kill point comes after all but two requests, plus up to 120 ms: at concurrency 2 the two left must
  // take longer than that, or a fast run ends before its kill point
  serve = await startServe(['--seed', 'reliability-crash-remap', '--latency-ms', '80']);
  const lines = ['id,email,phone'];
  for (let i = 0; i < ENTRIES; i++)
    lines.push(i % 4 === 0 ? `${i},,+1212${String(4_000_000 + i).slice(-7)}` : `${i},night.${i}@example.com,`);
  const input = dir.file('input.csv', `${lines.join('\n')}\n`);
  template = dir.file('template.db');
  const mapped = await runCli(
    [
      'map',
      input,
      '--email-col',
      'email',
      '--phone-col',
      'phone',
      '--state',
      template,
      '-o',
      dir.file('mapped.csv'),
      '-q',
    ],
    { env: serveEnv(serve) },
  );
  expect(mapped.code, mapped.stderr).toBe(0);
  initial = inspectState(template).entries;
  expect(initial.size).toBe(ENTRIES);
  // a year and more later: every salt bucket has rotated and every entry is due
  nowS = Math.floor((await advanceClock(serve.url, 400)) / 1000);

  const state = dir.file('baseline.db');
  copyState(state);
  const out = dir.file('baseline-changes.csv');
  const before = await sentOn();
  const res = await runCli(args(state, out), { env: serveEnv(serve) });
  expect(res.code, res.stderr).toBe(0);
  const report = inspectState(state);
  baseline = {
    changes: changeLines(out).sort(),
    header: readFileSync(out, 'utf8').split('\n')[0]!,
    entries: report.entries,
    sent: (await sentOn()) - before,
  };
  expect(baseline.sent).toBe(ENTRIES);
  expect(baseline.changes.length).toBeGreaterThan(ENTRIES / 2);
}, 180_000);

afterAll(async () => {
  await serve?.stop();
  dir.remove();
});

describe(`remap-due killed at ${POINTS} seeded points, then run again`, () => {
  const points = killPoints(SEED, POINTS, Math.ceil(ENTRIES / 5000) - 2, 120, ['SIGKILL', 'SIGINT', 'SIGTERM']);
  points.forEach((point, i) => {
    it(`#${i + 1}: ${point.signal} after ${point.afterRequests} request(s) + ${point.delayMs} ms`, async () => {
      const runDir = join(dir.path, `point-${i + 1}`);
      mkdirSync(runDir);
      const state = join(runDir, 'state.db');
      copyState(state);
      const first = join(runDir, 'changes-1.csv');
      const second = join(runDir, 'changes-2.csv');
      const env = serveEnv(serve);

      const killed = await runAndKill(args(state, first), env, serve.url, MAP_PATH, point);
      expect(
        killed.killed,
        `the run ended on its own (${describeEnd(killed)}) before the kill point\n${killed.stderr}`,
      ).toBe(true);
      expect(stackLines(killed.stderr)).toEqual([]);
      figures.crashes++;
      if (point.signal === 'SIGKILL') {
        figures.sigkill++;
        expect(killed.signal).toBe('SIGKILL');
        expect(existsSync(first)).toBe(false);
        for (const name of leftoversBesideState(runDir)) expect(name).toMatch(/^\.changes-1\.csv\.\d+\.tmp$/);
      } else {
        if (point.signal === 'SIGINT') figures.sigint++;
        else figures.sigterm++;
        expect(killed.code, killed.stderr).toBe(130);
        expect(killed.stderr).toMatch(/interrupted/);
        // a run that does not complete writes no changes file, and removes its temp file
        expect(existsSync(first)).toBe(false);
        expect(leftoversBesideState(runDir)).toEqual([]);
      }

      // intact, and every entry either untouched or exactly as the undisturbed night left it
      const report = inspectState(state);
      expect(report.integrity).toBe('ok');
      expect(report.halfWritten).toEqual([]);
      const committed = new Set<string>();
      const neither: string[] = [];
      for (const [key, entry] of report.entries) {
        const text = JSON.stringify(entry);
        if (text === JSON.stringify(initial.get(key))) continue;
        if (text !== JSON.stringify(baseline.entries.get(key))) neither.push(`${key} ${text}`);
        committed.add(key);
      }
      expect(neither.slice(0, 5)).toEqual([]);
      figures.entries_committed_before_crash += committed.size;
      const stillDue = [...report.entries.values()].filter((e) => e.r !== null && e.r <= nowS).length;
      expect(stillDue + committed.size).toBe(ENTRIES);

      const firstChanges = changeLines(first);

      // the same command again: exactly the entries still due are sent
      const before = await sentOn();
      const again = await runCli(args(state, second), { env });
      expect(again.code, again.stderr).toBe(0);
      const sent = (await sentOn()) - before;
      figures.items_resent += Math.max(0, sent - stillDue);
      expect(sent).toBe(stillDue);
      // the re-run's file holds the stopped run's journaled changes and its own; the stopped run wrote none, so the
      // two runs' files together hold each change of the night exactly once
      const secondChanges = changeLines(second).sort();
      const union = [...new Set([...firstChanges, ...secondChanges])].sort();
      const twice = secondChanges.filter((line) => firstChanges.includes(line));
      figures.outputs_compared++;
      figures.rows_compared += baseline.changes.length;
      figures.rows_lost += baseline.changes.length - union.length;
      figures.rows_delivered_twice += twice.length;
      if (point.signal === 'SIGKILL')
        figures.remap_changes_lost_after_sigkill += baseline.changes.length - union.length;
      expect(twice.length, 'changes written by both runs').toBe(0);
      expect([...firstChanges, ...secondChanges].sort()).toEqual(baseline.changes);
      expect(stackLines(again.stderr)).toEqual([]);
      const final = inspectState(state);
      expect(final.integrity).toBe('ok');
      expect(entriesText(final.entries)).toEqual(entriesText(baseline.entries));
    }, 120_000);
  });
});
