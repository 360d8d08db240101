import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServiceClient } from '../../src/client/index.js';
import { sha256Base64 } from '../../src/identity/index.js';
import { fetchRotatedBuckets } from '../../src/pipeline/v2/rotated-buckets.js';
import { openState } from '../../src/state/index.js';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import type { StoredEntry } from '../state/lookups.js';
import {
  advanceDays,
  loopbackFingerprint,
  readEntries,
  runCli,
  serviceNowMs,
  serviceStats,
  startServe,
  testClient,
  type Served,
  type StoredKey,
} from '../helpers/remap-e2e.js';

/**
 * The v2 life cycle through the built CLI against serve: map --api v2 --state, buckets before and after simulated
 * days, remap-due by rotated bucket (with v2, and with --upgrade), then migrate to v3. Identity time moves with
 * /_local/clock; the CLI runs on the real clock and plans remap-due with --now = the service's identity time.
 */

const V2_MAP = '/v2/identity/map';
const V3_MAP = '/v3/identity/map';
const N_ROWS = 3_000;
const N_PHONES = 600;

const rows = Array.from({ length: N_ROWS }, (_, i) => [
  String(i),
  `member-v2-${i}@example.com`,
  i < N_PHONES ? `+1212555${String(i).padStart(4, '0')}` : '',
]);
const keys: StoredKey[] = [
  ...rows.map((r) => ({ type: 'email' as const, hash: sha256Base64(r[1]) })),
  ...rows.filter((r) => r[2] !== '').map((r) => ({ type: 'phone' as const, hash: sha256Base64(r[2]) })),
];
const keyOf = (k: { type: string; hash: string }): string => `${k.type}:${k.hash}`;

let dir: string;
let served: Served;
let client: ServiceClient;
let input: string;
let statePath: string;

beforeAll(async () => {
  ensureBuilt();
  dir = mkdtempSync(join(tmpdir(), 'uid2-v2-life-e2e-'));
  served = await startServe();
  client = testClient(served);
  input = join(dir, 'in.csv');
  writeFileSync(input, `${['id,email,phone', ...rows.map((r) => r.join(','))].join('\n')}\n`);
  statePath = join(dir, 'v2.db');
}, 60_000);

afterAll(async () => {
  await client?.close();
  await served?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function delta<T>(
  path: string,
  action: () => Promise<T>,
): Promise<{ result: T; requests: number; items: number }> {
  const before = await serviceStats(served.url);
  const result = await action();
  const after = await serviceStats(served.url);
  return {
    result,
    requests: (after.requests[path] ?? 0) - (before.requests[path] ?? 0),
    items: (after.items[path] ?? 0) - (before.items[path] ?? 0),
  };
}

function readCsv(path: string): Record<string, string>[] {
  return parse(readFileSync(path, 'utf8'), { columns: true }) as Record<string, string>[];
}

function meta(path: string, key: string): string | null {
  const state = openState(path, { envFingerprint: loopbackFingerprint(served), readonly: true });
  try {
    return key === 'api' ? state.meta().api : state.getMeta(key);
  } finally {
    state.close();
  }
}

/** The keys whose stored bucket rotated since `sinceMs` (asked with the test's own client). */
async function inRotatedBuckets(entries: Map<string, StoredEntry>, sinceMs: number): Promise<StoredKey[]> {
  const rotated = new Set((await fetchRotatedBuckets(client, sinceMs)).map((b) => b.bucketId));
  return keys.filter((k) => {
    const e = entries.get(keyOf(k));
    return e?.bucketId != null && rotated.has(e.bucketId);
  });
}

describe('v2 life cycle (built CLI against serve)', () => {
  let mappedAtMs: number;
  let firstRemapS: number;

  it('map --api v2 --state stores every entry with its salt bucket', async () => {
    mappedAtMs = await serviceNowMs(served.url);
    const { result: run, items } = await delta(V2_MAP, () =>
      runCli(
        [
          'map',
          '--api',
          'v2',
          input,
          '--email-col',
          'email',
          '--phone-col',
          'phone',
          '--state',
          statePath,
          '-o',
          join(dir, 'mapped.csv'),
        ],
        { served },
      ),
    );
    expect(run.code, run.stderr).toBe(0);
    expect(items).toBe(keys.length);
    const entries = readEntries(statePath, served, keys);
    expect(entries.size).toBe(keys.length);
    expect([...entries.values()].every((e) => e.bucketId !== null && e.r === null && e.lastMappedS !== null)).toBe(
      true,
    );
  });

  it('buckets --since lists nothing before a rotation, and the rotated buckets after simulated days, with or without a zone', async () => {
    const since = new Date(await serviceNowMs(served.url)).toISOString();
    const before = await runCli(['buckets', '--since', since, '-o', join(dir, 'b0.csv')], { served });
    expect(before.code, before.stderr).toBe(0);
    expect(readFileSync(join(dir, 'b0.csv'), 'utf8')).toBe('bucket_id,last_updated\n');
    expect(before.stderr).toMatch(/warning: buckets \(POST \/v2\/identity\/buckets\) is the v2 API/);

    await advanceDays(served.url, 20);
    const sinceMs = Date.parse(since);
    const zoneless = since.replace('Z', '');
    // the same instant written in another zone
    const shifted = new Date(sinceMs + 5.5 * 3_600_000).toISOString().replace('Z', '+05:30');
    const { result: after, requests } = await delta('/v2/identity/buckets', () =>
      runCli(['buckets', '--since', zoneless, '-o', join(dir, 'b1.csv')], { served }),
    );
    expect(after.code, after.stderr).toBe(0);
    expect(requests).toBe(1);
    const offset = await runCli(['buckets', '--since', shifted, '-o', join(dir, 'b2.csv'), '--format', 'jsonl'], {
      served,
    });
    expect(offset.code, offset.stderr).toBe(0);

    const listed = readCsv(join(dir, 'b1.csv'));
    const days = new Set(listed.map((b) => b.last_updated));
    expect(days.size).toBe(20);
    for (const d of days) {
      expect(d).toMatch(/^\d{4}-\d{2}-\d{2}T00:00:00\.000Z$/);
      expect(Date.parse(d)).toBeGreaterThan(sinceMs);
    }
    // about 1/365 of the 2^20 buckets a day
    expect(listed.length).toBeGreaterThan((20 * 2 ** 20) / 365 / 1.2);
    expect(listed.length).toBeLessThan((20 * 2 ** 20 * 1.2) / 365);
    const jsonl = readFileSync(join(dir, 'b2.csv'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, string>);
    expect(jsonl).toEqual(listed);
    // without --state nothing is marked
    expect(meta(statePath, 'last_buckets_check')).toBeNull();
  });

  it('remap-due re-maps exactly the entries whose bucket rotated since they were mapped, with v2', async () => {
    const before = readEntries(statePath, served, keys);
    const due = await inRotatedBuckets(before, mappedAtMs);
    // about 20/365 of the entries
    expect(due.length).toBeGreaterThan((keys.length * 20) / 365 / 2);
    expect(due.length).toBeLessThan(((keys.length * 20) / 365) * 2);

    firstRemapS = Math.floor((await serviceNowMs(served.url)) / 1000);
    const changes = join(dir, 'changes-1.csv');
    const v3Before = (await serviceStats(served.url)).items[V3_MAP] ?? 0;
    const { result: run, items } = await delta(V2_MAP, () =>
      runCli(
        [
          'remap-due',
          '--state',
          statePath,
          '--now',
          String(firstRemapS),
          '-o',
          changes,
          '--summary-json',
          join(dir, 'sum-1.json'),
        ],
        { served },
      ),
    );
    expect(run.code, run.stderr).toBe(0);
    expect(items).toBe(due.length);
    expect((await serviceStats(served.url)).items[V3_MAP] ?? 0).toBe(v3Before);
    expect(run.stderr).toMatch(new RegExp(`${due.length.toLocaleString('en-US')} entries marked due`));

    const after = readEntries(statePath, served, keys);
    const dueKeys = new Set(due.map(keyOf));
    for (const k of keys) {
      const was = before.get(keyOf(k)) as StoredEntry;
      const now = after.get(keyOf(k)) as StoredEntry;
      if (dueKeys.has(keyOf(k))) {
        expect(now).toMatchObject({ due: false, r: null, lastMappedS: firstRemapS });
        expect(now.bucketId).not.toBeNull();
      } else {
        expect(now).toEqual(was);
      }
    }
    const changed = due.filter((k) => after.get(keyOf(k))?.u !== before.get(keyOf(k))?.u);
    const rowsOut = readCsv(changes);
    expect(Object.keys(rowsOut[0] ?? {})).toEqual([
      'hash_type',
      'hash',
      'old_raw_uid',
      'raw_uid',
      'prev_raw_uid',
      'refresh_from',
      'status',
      'bucket_id',
    ]);
    expect(rowsOut.map((r) => `${r.hash_type}:${r.hash}`).sort()).toEqual(changed.map(keyOf).sort());
    for (const row of rowsOut) expect(row.bucket_id).toBe(after.get(`${row.hash_type}:${row.hash}`)?.bucketId);
    const summary = JSON.parse(readFileSync(join(dir, 'sum-1.json'), 'utf8')) as Record<string, unknown>;
    expect(summary).toMatchObject({
      command: 'remap-due',
      api: 'v2',
      entries: due.length,
      marked_due: due.length,
      changed: changed.length,
    });

    // the check is recorded: the same night again asks buckets once and re-maps nothing
    expect(Date.parse(meta(statePath, 'last_buckets_check') as string)).toBe(firstRemapS * 1000 - 3_600_000);
    const again = await delta(V2_MAP, () =>
      runCli(['remap-due', '--state', statePath, '--now', String(firstRemapS), '-o', join(dir, 'changes-2.csv')], {
        served,
      }),
    );
    expect(again.result.code, again.result.stderr).toBe(0);
    expect(again.items).toBe(0);
  });

  it('remap-due --upgrade re-maps the entries of rotated buckets with v3, which makes them v3 entries', async () => {
    const upgradePath = join(dir, 'upgrade.db');
    copyFileSync(statePath, upgradePath);
    expect(existsSync(`${statePath}-wal`) && readFileSync(`${statePath}-wal`).length > 0).toBe(false);
    await advanceDays(served.url, 7);
    const before = readEntries(upgradePath, served, keys);
    const due = await inRotatedBuckets(before, firstRemapS * 1000);
    expect(due.length).toBeGreaterThan(0);
    const nowS = Math.floor((await serviceNowMs(served.url)) / 1000);
    const v2Before = (await serviceStats(served.url)).items[V2_MAP] ?? 0;
    const { result: run, items } = await delta(V3_MAP, () =>
      runCli(
        ['remap-due', '--state', upgradePath, '--upgrade', '--now', String(nowS), '-o', join(dir, 'changes-up.csv')],
        { served },
      ),
    );
    expect(run.code, run.stderr).toBe(0);
    expect(items).toBe(due.length);
    expect((await serviceStats(served.url)).items[V2_MAP] ?? 0).toBe(v2Before);
    const after = readEntries(upgradePath, served, keys);
    for (const k of due) {
      const e = after.get(keyOf(k)) as StoredEntry;
      expect(e.bucketId).toBeNull();
      expect(e.r).toBeGreaterThan(nowS);
      // rotated within 90 days: v3 names the previous raw UID
      expect(e.p).toBe(before.get(keyOf(k))?.u);
    }
    expect(readEntries(upgradePath, served, keys).size).toBe(keys.length);
  });

  it('migrate converts the v2 state to v3, resumable; its raw IDs equal a fresh v3 map of the same input', async () => {
    const before = readEntries(statePath, served, keys);
    // 7 simulated days since the last remap: some raw IDs are stale and change now
    const stale = new Set((await inRotatedBuckets(before, firstRemapS * 1000)).map(keyOf));
    expect(stale.size).toBeGreaterThan(0);

    const first = await delta(V3_MAP, () =>
      runCli(
        [
          'migrate',
          '--state',
          statePath,
          '--limit',
          '1000',
          '-o',
          join(dir, 'mig-1.csv'),
          '--summary-json',
          join(dir, 'mig-1.json'),
        ],
        { served },
      ),
    );
    expect(first.result.code, first.result.stderr).toBe(0);
    expect(first.items).toBe(1000);
    expect(meta(statePath, 'api')).toBe('v2');
    expect(first.result.stderr).toMatch(/run uid2-batch migrate --state .* again to continue/);

    // while migrating, v2 runs are refused with what to do
    const v2Map = await runCli(
      [
        'map',
        '--api',
        'v2',
        input,
        '--email-col',
        'email',
        '--phone-col',
        'phone',
        '--state',
        statePath,
        '-o',
        join(dir, 'x.csv'),
      ],
      { served },
    );
    expect(v2Map.code).toBe(2);
    expect(v2Map.stderr).toMatch(/being migrated to v3: finish with uid2-batch migrate --state/);
    const v2Remap = await runCli(['remap-due', '--state', statePath, '-o', join(dir, 'x.csv')], { served });
    expect(v2Remap.code).toBe(2);

    const rest = await delta(V3_MAP, () =>
      runCli(
        ['migrate', '--state', statePath, '-o', join(dir, 'mig-2.csv'), '--summary-json', join(dir, 'mig-2.json')],
        { served },
      ),
    );
    expect(rest.result.code, rest.result.stderr).toBe(0);
    expect(rest.items).toBe(keys.length - 1000);
    expect(meta(statePath, 'api')).toBe('v3');
    expect(rest.result.stderr).toMatch(/is a v3 state file now/);

    // what stayed and what changed, over both runs
    const s1 = JSON.parse(readFileSync(join(dir, 'mig-1.json'), 'utf8')) as Record<string, number>;
    const s2 = JSON.parse(readFileSync(join(dir, 'mig-2.json'), 'utf8')) as Record<string, number>;
    expect(s1.same + s2.same).toBe(keys.length - stale.size);
    expect(s1.changed + s2.changed).toBe(stale.size);
    const changedRows = [...readCsv(join(dir, 'mig-1.csv')), ...readCsv(join(dir, 'mig-2.csv'))];
    expect(changedRows.map((r) => `${r.hash_type}:${r.hash}`).sort()).toEqual([...stale].sort());

    // a fresh v3 map of the same input, on a new state file, gives the same raw IDs
    const freshPath = join(dir, 'fresh-v3.db');
    const fresh = await runCli(
      [
        'map',
        input,
        '--email-col',
        'email',
        '--phone-col',
        'phone',
        '--state',
        freshPath,
        '-o',
        join(dir, 'fresh.csv'),
      ],
      { served },
    );
    expect(fresh.code, fresh.stderr).toBe(0);
    const migrated = readEntries(statePath, served, keys);
    const v3 = readEntries(freshPath, served, keys);
    for (const k of keys) {
      const m = migrated.get(keyOf(k)) as StoredEntry;
      const f = v3.get(keyOf(k)) as StoredEntry;
      expect(m.u, keyOf(k)).toBe(f.u);
      expect(m.r).toBe(f.r);
      expect(m.bucketId).toBeNull();
    }
    // and the migrated file now serves v3 map runs from the state: nothing is sent
    const { result: reuse, items } = await delta(V3_MAP, () =>
      runCli(
        [
          'map',
          input,
          '--email-col',
          'email',
          '--phone-col',
          'phone',
          '--state',
          statePath,
          '-o',
          join(dir, 'again.csv'),
        ],
        { served },
      ),
    );
    expect(reuse.code, reuse.stderr).toBe(0);
    expect(items).toBe(0);
    expect(readFileSync(join(dir, 'again.csv'), 'utf8')).toBe(readFileSync(join(dir, 'fresh.csv'), 'utf8'));
  });
});
