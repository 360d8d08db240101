// A shard's changes left in a state file (its run stopped before its output): only a run of that shard writes them.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Base64 } from '../../src/identity/index.js';
import { runnerOfKey } from '../../src/pipeline/shard/shard-keys.js';
import { openState } from '../../src/state/index.js';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import { loopbackFingerprint, runCli, type Served, startServe } from '../helpers/remap-e2e.js';

const emails = Array.from({ length: 60 }, (_, i) => `leftover-${i}@example.com`);

let dir: string;
let served: Served;

beforeAll(async () => {
  ensureBuilt();
  dir = mkdtempSync(join(tmpdir(), 'uid2-shard-leftovers-e2e-'));
  served = await startServe();
  writeFileSync(join(dir, 'in.csv'), `${['email', ...emails].join('\n')}\n`);
}, 60_000);

afterAll(async () => {
  await served?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Journals one change of a key of shard 0 of 3 in the channel of `--shard 0/3`, as a stopped run of it leaves it. */
function leaveShardChange(path: string, v2: boolean): string {
  const hash = emails.map((e) => sha256Base64(e)).find((h) => runnerOfKey('email', h, 3) === 0) as string;
  const change = {
    kind: 'email',
    hash,
    oldRawUid: sha256Base64('old raw UID'),
    newRawUid: sha256Base64('new raw UID'),
    prevRawUid: null,
    refreshFrom: null,
    status: 'mapped',
    ...(v2 ? { bucketId: 'b1' } : {}),
  };
  const s = openState(path, { envFingerprint: loopbackFingerprint(served) });
  try {
    const runId = s.startRun('remap-due', '{}');
    s.commitBatch([], Date.now() / 1000, { runId, channel: 'remap 0/3', rows: [JSON.stringify(change)] });
  } finally {
    s.close();
  }
  return hash;
}

function dataLines(path: string): string[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .slice(1);
}

describe.each([
  { api: 'v3', v2: false },
  { api: 'v2', v2: true },
])('remap-due --shard on a $api state file', { timeout: 120_000 }, ({ api, v2 }) => {
  it("another shard's run leaves a shard's changes; the next run of that shard writes them once", async () => {
    const state = join(dir, `${api}.db`);
    const mapped = await runCli(
      ['map', '--api', api, join(dir, 'in.csv'), '--state', state, '-o', join(dir, `${api}.csv`)],
      {
        served,
      },
    );
    expect(mapped.code, mapped.stderr).toBe(0);
    const hash = leaveShardChange(state, v2);
    const remap = async (shard: string, out: string): Promise<string[]> => {
      const run = await runCli(['remap-due', '--state', state, '--shard', shard, '-o', join(dir, out), '-q'], {
        served,
      });
      expect(run.code, run.stderr).toBe(0);
      return dataLines(join(dir, out));
    };
    expect(await remap('1/3', `${api}-other.csv`)).toEqual([]);
    const own = await remap('0/3', `${api}-own.csv`);
    expect(own.length).toBe(1);
    expect(own[0]).toContain(hash);
    expect(await remap('0/3', `${api}-again.csv`)).toEqual([]);
  });
});

describe('optout-check --state --shard on a state file', { timeout: 120_000 }, () => {
  it("another shard's sweep leaves a shard's opt-outs; the next sweep of that shard writes them once", async () => {
    const state = join(dir, 'optout.db');
    const mapped = await runCli(['map', join(dir, 'in.csv'), '--state', state, '-o', join(dir, 'optout-map.csv')], {
      served,
    });
    expect(mapped.code, mapped.stderr).toBe(0);
    const hash = emails.map((e) => sha256Base64(e)).find((h) => runnerOfKey('email', h, 3) === 0) as string;
    const rawUid = sha256Base64('an opted-out raw UID');
    const s = openState(state, { envFingerprint: loopbackFingerprint(served) });
    try {
      const runId = s.startRun('optout-check', '{}');
      const row = {
        entry: { id: 1, type: 'email', hash },
        which: 'u',
        rawUid,
        verdict: { kind: 'opted_out', sinceMs: 1 },
      };
      s.commitBatch([], Date.now() / 1000, { runId, channel: 'optout 0/3', rows: [JSON.stringify(row)] });
    } finally {
      s.close();
    }
    const sweep = async (shard: string, out: string): Promise<string[]> => {
      const run = await runCli(
        ['optout-check', '--state', state, '--shard', shard, '--only-opted-out', '-o', join(dir, out), '-q'],
        { served },
      );
      expect(run.code, run.stderr).toBe(0);
      return dataLines(join(dir, out));
    };
    expect((await sweep('1/3', 'optout-other.csv')).filter((l) => l.includes(rawUid))).toEqual([]);
    const own = (await sweep('0/3', 'optout-own.csv')).filter((l) => l.includes(rawUid));
    expect(own.length).toBe(1);
    expect((await sweep('0/3', 'optout-again.csv')).filter((l) => l.includes(rawUid))).toEqual([]);
  });
});

describe("a shard's changes left for a run of another share count", { timeout: 120_000 }, () => {
  it('are named in one line by runs of another N and without --shard, and written once by their own shard', async () => {
    const state = join(dir, 'other-n.db');
    const mapped = await runCli(['map', join(dir, 'in.csv'), '--state', state, '-o', join(dir, 'other-n.csv')], {
      served,
    });
    expect(mapped.code, mapped.stderr).toBe(0);
    const hash = leaveShardChange(state, false);
    const line =
      'uid2-batch: 1 pending change(s) of channel "remap 0/3" are not written by this run: only remap-due --shard 0/3 writes them';
    const remap = async (shard: string[], out: string): Promise<{ rows: string[]; said: string[] }> => {
      const run = await runCli(['remap-due', '--state', state, ...shard, '-o', join(dir, out)], {
        served,
      });
      expect(run.code, run.stderr).toBe(0);
      return { rows: dataLines(join(dir, out)), said: run.stderr.split('\n').filter((l) => l.includes('channel')) };
    };
    expect(await remap(['--shard', '0/4'], 'other-n-4.csv')).toEqual({ rows: [], said: [line] });
    expect(await remap([], 'other-n-whole.csv')).toEqual({ rows: [], said: [line] });
    // a sibling shard of the same N says nothing: its own runner writes them
    expect((await remap(['--shard', '1/3'], 'other-n-sibling.csv')).said).toEqual([]);
    const own = await remap(['--shard', '0/3'], 'other-n-own.csv');
    expect(own.rows.length).toBe(1);
    expect(own.rows[0]).toContain(hash);
    expect(await remap(['--shard', '0/4'], 'other-n-after.csv')).toEqual({ rows: [], said: [] });
  });
});
