import { copyFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, startServe, type ServeProcess } from '../helpers/map-e2e-processes.js';
import {
  describeEnd,
  entriesText,
  inspectState,
  killPoints,
  leftoversBesideState,
  OPTOUT_PATH,
  optOut,
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
 * Crashes of `optout-check --state` (the opt-out sweep): SIGKILL and SIGINT at seeded points, then the same
 * command again. Every entry must be either as it was or as the undisturbed sweep left it (tombstone and check
 * time of a batch together). A run that does not complete writes no output, whatever the signal: the opt-outs of
 * its committed batches wait in the state file for the next completed run. A full sweep run again gives the
 * undisturbed verdicts and state; a partial sweep (--sweep-fraction, the nightly form) run again never sends an
 * entry the killed run had committed.
 */

const ENTRIES = scaled(15_000);
const POINTS = scaled(10);
const SEED = 0x6f7074;
const OPTED_OUT_EVERY = 97;
const SINCE_MS = Date.UTC(2026, 2, 1);
const TYPE_CODE: Record<string, string> = { email: '0', phone: '1' };

const dir = tempDir('crash-optout');
let serve: ServeProcess;
let template: string;
let initial: Map<string, StoredEntry>;
let baseline: { lines: string[]; entries: Map<string, StoredEntry>; verdicts: Map<string, string> };
const figures = {
  crashes: 0,
  sigkill: 0,
  sigint: 0,
  outputs_compared: 0,
  rows_compared: 0,
  rows_lost: 0,
  items_resent: 0,
  entries_committed_before_crash: 0,
  optout_verdicts_lost_after_sigkill: 0,
};

function copyState(to: string): void {
  for (const suffix of ['', '-wal']) if (existsSync(template + suffix)) copyFileSync(template + suffix, to + suffix);
}

function args(state: string, out: string, extra: string[] = []): string[] {
  return ['optout-check', '--state', state, '-o', out, '-q', ...extra];
}

function lines(path: string): string[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .slice(1);
}

/** `kind,hash,raw_uid,which,...` -> the state's key of the entry. */
const entryOf = (line: string): string => {
  const [kind, hash] = line.split(',');
  return `${TYPE_CODE[kind!]}:${hash}`;
};
const rawUidOf = (line: string): string => line.split(',')[2]!;

/** What an entry says, without when it was checked. */
const facts = (e: StoredEntry | undefined): string =>
  e === undefined ? 'missing' : `${e.status} ${e.u} ${e.p} ${e.r} ${e.optedOutSince}`;

const sentOn = async (): Promise<number> => (await statsOf(serve.url)).items[OPTOUT_PATH] ?? 0;

recordWhenPassed('crash_optout_check', () => figures);

beforeAll(async () => {
  requireBuilt();
  serve = await startServe(['--seed', 'reliability-crash-optout', '--latency-ms', '120']);
  const rows = ['id,email'];
  for (let i = 0; i < ENTRIES; i++) rows.push(`${i},sweep.${i}@example.com`);
  const input = dir.file('input.csv', `${rows.join('\n')}\n`);
  template = dir.file('template.db');
  const mapped = await runCli(['map', input, '--state', template, '-o', dir.file('mapped.csv'), '-q'], {
    env: serveEnv(serve),
  });
  expect(mapped.code, mapped.stderr).toBe(0);
  initial = inspectState(template).entries;
  // opt-outs that happen after the mapping: only a sweep finds them
  for (let i = 0; i < ENTRIES; i += OPTED_OUT_EVERY)
    await optOut(serve.url, { email: `sweep.${i}@example.com`, since_ms: SINCE_MS });

  const state = dir.file('baseline.db');
  copyState(state);
  const out = dir.file('baseline.csv');
  const res = await runCli(args(state, out), { env: serveEnv(serve) });
  expect(res.code, res.stderr).toBe(0);
  const got = lines(out);
  baseline = {
    lines: got.sort(),
    entries: inspectState(state).entries,
    verdicts: new Map(got.map((l) => [rawUidOf(l), l])),
  };
  // an opted-out identity: its raw UID and its previous raw UID are both reported
  expect(new Set(got.filter((l) => l.includes(',true,')).map(entryOf)).size).toBe(Math.ceil(ENTRIES / OPTED_OUT_EVERY));
  expect([...baseline.entries.values()].filter((e) => e.status === 2).length).toBe(
    Math.ceil(ENTRIES / OPTED_OUT_EVERY),
  );
}, 180_000);

afterAll(async () => {
  await serve?.stop();
  dir.remove();
});

describe(`optout-check --state killed at ${POINTS} seeded points, then run again`, () => {
  // about a quarter of the entries also hold a previous raw UID: ~1.25 raw UIDs per entry, 5,000 per request
  const requests = Math.ceil((ENTRIES * 1.25) / 5000);
  killPoints(SEED, POINTS, Math.max(1, requests - 1), 120).forEach((drawn, i) => {
    const partial = i % 4 >= 2;
    // a half sweep sends half the requests
    const point = partial
      ? { ...drawn, afterRequests: Math.min(drawn.afterRequests, Math.max(1, Math.ceil(requests / 2) - 1)) }
      : drawn;
    const sweep = partial ? ['--sweep-fraction', '0.5'] : [];
    it(`#${i + 1}: ${point.signal} after ${point.afterRequests} request(s) + ${point.delayMs} ms, ${partial ? 'half sweep' : 'full sweep'}`, async () => {
      const runDir = join(dir.path, `point-${i + 1}`);
      mkdirSync(runDir);
      const state = join(runDir, 'state.db');
      copyState(state);
      const first = join(runDir, 'checked-1.csv');
      const second = join(runDir, 'checked-2.csv');
      const env = serveEnv(serve);

      const killed = await runAndKill(args(state, first, sweep), env, serve.url, OPTOUT_PATH, point);
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
        for (const name of leftoversBesideState(runDir)) expect(name).toMatch(/^\.checked-1\.csv\.\d+\.tmp$/);
      } else {
        figures.sigint++;
        expect(killed.code, killed.stderr).toBe(130);
        expect(killed.stderr).toMatch(/interrupted/);
        // a run that does not complete writes no list, and removes its temp file
        expect(existsSync(first)).toBe(false);
        expect(leftoversBesideState(runDir)).toEqual([]);
      }

      const report = inspectState(state);
      expect(report.integrity).toBe('ok');
      expect(report.halfWritten).toEqual([]);
      const committed = new Set<string>();
      const wrong: string[] = [];
      for (const [key, entry] of report.entries) {
        const now = facts(entry);
        const after = facts(baseline.entries.get(key));
        if (now !== facts(initial.get(key)) && now !== after) wrong.push(`${key}: ${now}`);
        if (entry.lastOptoutCheck !== null) {
          if (now !== after) wrong.push(`${key} checked but not as the undisturbed sweep: ${now}`);
          committed.add(key);
        }
      }
      expect(wrong.slice(0, 5)).toEqual([]);
      figures.entries_committed_before_crash += committed.size;
      const tombstoned = new Set(
        [...report.entries].filter(([key, e]) => e.status === 2 && initial.get(key)?.status !== 2).map(([key]) => key),
      );
      const firstVerdicts = lines(first);

      const before = await sentOn();
      const again = await runCli(args(state, second, sweep), { env });
      expect(again.code, again.stderr).toBe(0);
      const sent = (await sentOn()) - before;
      const checked = lines(second);
      expect(checked.filter((line) => line !== baseline.verdicts.get(rawUidOf(line))).slice(0, 5)).toEqual([]);
      // the opt-outs the killed run found and committed were journaled in the state: the re-run writes them first,
      // without sending them again, then what it checks itself
      const replayed = checked.filter((l) => tombstoned.has(entryOf(l)));
      const fresh = checked.filter((l) => !tombstoned.has(entryOf(l)));
      expect(replayed.sort()).toEqual(baseline.lines.filter((l) => tombstoned.has(entryOf(l))));
      expect(sent).toBe(new Set(fresh.map(rawUidOf)).size);
      if (partial) {
        // the nightly form: on from the last committed batch, so nothing the killed run committed is sent again
        const resent = fresh.filter((l) => committed.has(entryOf(l)));
        figures.items_resent += resent.length;
        expect(resent).toEqual([]);
        const withRawUid = [...report.entries.values()].filter((e) => e.u !== null || e.p !== null).length;
        expect(new Set(fresh.map(entryOf)).size).toBe(Math.ceil(0.5 * withRawUid));
      } else {
        // a full sweep checks every entry that still holds a raw UID, and the replayed opt-outs complete the night
        expect(checked.sort()).toEqual(baseline.lines);
        const union = [...new Set([...firstVerdicts, ...checked])].sort();
        figures.outputs_compared++;
        figures.rows_compared += baseline.lines.length;
        figures.rows_lost += baseline.lines.length - union.length;
        if (point.signal === 'SIGKILL')
          figures.optout_verdicts_lost_after_sigkill += baseline.lines.length - union.length;
        expect(union).toEqual(baseline.lines);
        const final = inspectState(state);
        expect(final.integrity).toBe('ok');
        expect(entriesText(final.entries, true)).toEqual(entriesText(baseline.entries, true));
      }
    }, 120_000);
  });
});
