// remap-due and optout-check --state with --shard K/N: the runners' shares of the state are disjoint and cover it.
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Base64 } from '../../src/identity/index.js';
import { runnerOfKey } from '../../src/pipeline/shard/shard-keys.js';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import {
  advanceDays,
  buildState,
  runCli,
  serviceStats,
  setServiceTime,
  startServe,
  type Served,
  type StoredKey,
} from '../helpers/remap-e2e.js';

const MAP_PATH = '/v3/identity/map';
const keys: StoredKey[] = Array.from({ length: 1_500 }, (_, i) => ({
  type: i % 5 === 0 ? ('phone' as const) : ('email' as const),
  hash: sha256Base64(i % 5 === 0 ? `+1415555${String(i).padStart(4, '0')}` : `shard${i}@example.com`),
}));

let dir: string;
let served: Served;
let built: string;
let nowS: number;

beforeAll(async () => {
  ensureBuilt();
  dir = mkdtempSync(join(tmpdir(), 'uid2-state-shard-'));
  served = await startServe();
  await setServiceTime(served.url, '2026-01-01T00:00:00Z');
  built = join(dir, 'built.db');
  await buildState(built, served, keys);
  nowS = Math.floor((await advanceDays(served.url, 120)) / 1000);
}, 120_000);

afterAll(async () => {
  await served?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function rowsOf(path: string): Record<string, string>[] {
  return parse(readFileSync(path, 'utf8'), { columns: true }) as Record<string, string>[];
}

function copyOfState(name: string): string {
  const path = join(dir, name);
  copyFileSync(built, path);
  return path;
}

async function mapItems(): Promise<number> {
  return (await serviceStats(served.url)).items[MAP_PATH] ?? 0;
}

describe('--shard K/N over a state file', () => {
  it('remap-due: 3 runners re-map each due entry once, each its own keys, together what one runner does', async () => {
    const one = copyOfState('one.db');
    const before = await mapItems();
    const whole = await runCli(['remap-due', '--state', one, '--now', String(nowS), '-o', join(dir, 'one.csv'), '-q'], {
      served,
    });
    expect(whole.code, whole.stderr).toBe(0);
    const sentByOne = (await mapItems()) - before;
    const wholeRows = rowsOf(join(dir, 'one.csv'));
    expect(sentByOne).toBeGreaterThan(100);

    const shared = copyOfState('shared.db');
    const start = await mapItems();
    const union: Record<string, string>[] = [];
    for (let k = 0; k < 3; k++) {
      const out = join(dir, `remap-${k}.csv`);
      const run = await runCli(
        ['remap-due', '--state', shared, '--now', String(nowS), '--shard', `${k}/3`, '-o', out, '-q'],
        { served },
      );
      expect(run.code, run.stderr).toBe(0);
      const rows = rowsOf(out);
      expect(rows.length).toBeGreaterThan(0);
      for (const row of rows) expect(runnerOfKey(row.hash_type, row.hash, 3)).toBe(k);
      union.push(...rows);
    }
    expect((await mapItems()) - start).toBe(sentByOne);
    const key = (r: Record<string, string>) => `${r.hash_type}:${r.hash}`;
    expect(union.map(key).sort()).toEqual(wholeRows.map(key).sort());
    // nothing is left due once every runner has run
    const again = await runCli(['remap-due', '--state', shared, '--now', String(nowS), '--dry-run'], { served });
    expect(again.stdout + again.stderr).toMatch(/\b0 entries due now/);
  }, 180_000);

  it('optout-check --state: 2 runners check each stored raw UID once, together what one runner checks', async () => {
    const one = copyOfState('optout-one.db');
    const whole = await runCli(['optout-check', '--state', one, '-o', join(dir, 'optout-one.csv'), '-q'], { served });
    expect(whole.code, whole.stderr).toBe(0);
    const wholeRows = rowsOf(join(dir, 'optout-one.csv'));
    expect(wholeRows.length).toBeGreaterThan(keys.length / 2);
    const shared = copyOfState('optout-shared.db');
    const union: Record<string, string>[] = [];
    for (let k = 0; k < 2; k++) {
      const out = join(dir, `optout-${k}.csv`);
      const run = await runCli(['optout-check', '--state', shared, '--shard', `${k}/2`, '-o', out, '-q'], { served });
      expect(run.code, run.stderr).toBe(0);
      const rows = rowsOf(out);
      expect(rows.length).toBeGreaterThan(0);
      for (const row of rows) expect(runnerOfKey(row.hash_type, row.hash, 2)).toBe(k);
      union.push(...rows);
    }
    const line = (r: Record<string, string>) => JSON.stringify(r);
    expect(union.map(line).sort()).toEqual(wholeRows.map(line).sort());
  }, 180_000);

  it('--shard with --sweep-fraction, or without --state, is one usage line', async () => {
    const withFraction = await runCli(['optout-check', '--state', built, '--sweep-fraction', '0.1', '--shard', '1/2'], {
      served,
    });
    expect(withFraction.code).toBe(2);
    expect(withFraction.stderr).toMatch(/--shard with --sweep-fraction/);
    const noState = await runCli(['optout-check', join(dir, 'raw.csv'), '--shard', '1/2'], { served });
    expect(noState.code).toBe(2);
    expect(noState.stderr).toMatch(/--shard shares out the entries of a state file/);
  });
});
