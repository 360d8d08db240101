import {
  copyFileSync,
  existsSync,
  linkSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Base64 } from '../../src/identity/index.js';
import { openState } from '../../src/state/index.js';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import type { StoredEntry } from '../state/lookups.js';
import {
  advanceDays,
  buildState,
  loopbackFingerprint,
  optOut,
  readEntries,
  runCli,
  serviceNowMs,
  serviceStats,
  setServiceTime,
  startServe,
  type Served,
  type StoredKey,
} from '../helpers/remap-e2e.js';

const MAP_PATH = '/v3/identity/map';
const N_EMAIL = 2_600;
const N_PHONE = 400;
const DAYS = 30;

const keys: StoredKey[] = [
  ...Array.from({ length: N_EMAIL }, (_, i) => ({
    type: 'email' as const,
    hash: sha256Base64(`member${i}@example.com`),
  })),
  ...Array.from({ length: N_PHONE }, (_, i) => ({
    type: 'phone' as const,
    hash: sha256Base64(`+1415555${String(i).padStart(4, '0')}`),
  })),
];
const keyOf = (k: StoredKey): string => `${k.type}:${k.hash}`;

let dir: string;
let served: Served;
let statePath: string;

beforeAll(async () => {
  ensureBuilt();
  dir = mkdtempSync(join(tmpdir(), 'uid2-remap-e2e-'));
  // a known identity date; envelopes (the CLI's and the test client's) stay on the real clock
  served = await startServe();
  await setServiceTime(served.url, '2026-01-01T00:00:00Z');
  statePath = join(dir, 'state.db');
  await buildState(statePath, served, keys);
}, 120_000);

afterAll(async () => {
  await served?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function mapItems(stats: { items: Record<string, number> }): number {
  return stats.items[MAP_PATH] ?? 0;
}

function readChanges(path: string): Record<string, string>[] {
  return parse(readFileSync(path, 'utf8'), { columns: true }) as Record<string, string>[];
}

describe('remap-due over simulated days (built CLI against serve)', () => {
  let before: Map<string, StoredEntry>;
  let nowS: number;
  let due: StoredKey[];

  it(`after ${DAYS} days sends exactly the entries with r <= now, and every r is in the future afterwards`, async () => {
    before = readEntries(statePath, served, keys);
    expect(before.size).toBe(keys.length);
    nowS = Math.floor((await advanceDays(served.url, DAYS)) / 1000);
    due = keys.filter((k) => (before.get(keyOf(k))?.r ?? Infinity) <= nowS);
    // about 1/365 of the entries a day
    expect(due.length).toBeGreaterThan((keys.length * DAYS) / 365 / 2);
    expect(due.length).toBeLessThan(((keys.length * DAYS) / 365) * 2);

    const sentBefore = mapItems(await serviceStats(served.url));
    const changesPath = join(dir, 'changes-1.csv');
    const run = await runCli(
      [
        'remap-due',
        '--state',
        statePath,
        '-o',
        changesPath,
        '--now',
        String(nowS),
        '--summary-json',
        join(dir, 'sum-1.json'),
      ],
      { served },
    );
    expect(run.stderr).toMatch(new RegExp(`remap-due: ${due.length.toLocaleString('en-US')} entries in`));
    expect(run.code, run.stderr).toBe(0);
    expect(mapItems(await serviceStats(served.url)) - sentBefore).toBe(due.length);

    const after = readEntries(statePath, served, keys);
    expect([...after.values()].every((e) => e.r !== null && e.r > nowS)).toBe(true);
    // the entries that were not due are untouched
    const dueKeys = new Set(due.map(keyOf));
    for (const k of keys.filter((k) => !dueKeys.has(keyOf(k))))
      expect(after.get(keyOf(k))).toEqual(before.get(keyOf(k)));

    // the changes file lists exactly the entries whose raw UID changed; p is the old raw UID (rotated within 90 days)
    const changed = due.filter((k) => after.get(keyOf(k))?.u !== before.get(keyOf(k))?.u);
    expect(changed.length).toBeGreaterThan(0);
    const rows = readChanges(changesPath);
    expect(Object.keys(rows[0])).toEqual([
      'hash_type',
      'hash',
      'old_raw_uid',
      'raw_uid',
      'prev_raw_uid',
      'refresh_from',
      'status',
    ]);
    expect(new Set(rows.map((r) => `${r.hash_type}:${r.hash}`))).toEqual(new Set(changed.map(keyOf)));
    expect(rows.length).toBe(changed.length);
    for (const row of rows) {
      const old = before.get(`${row.hash_type}:${row.hash}`);
      const now = after.get(`${row.hash_type}:${row.hash}`);
      expect(row.status).toBe('mapped');
      expect(row.old_raw_uid).toBe(old?.u);
      expect(row.raw_uid).toBe(now?.u);
      expect(row.prev_raw_uid).toBe(old?.u);
      expect(now?.p).toBe(old?.u);
      expect(Number(row.refresh_from)).toBe(now?.r);
    }
    const summary = JSON.parse(readFileSync(join(dir, 'sum-1.json'), 'utf8')) as Record<string, unknown>;
    expect(summary).toMatchObject({
      command: 'remap-due',
      rows: due.length,
      entries: due.length,
      changed: changed.length,
      http_429: 0,
      requests: 1,
    });
    expect(summary.status).toEqual({ mapped: due.length, optout: 0, invalid: 0, error: 0 });
    expect(typeof summary.duration_s).toBe('number');
  });

  it('a second run the same day sends nothing, writes an empty changes file, and says when the next entries come due', async () => {
    const sentBefore = mapItems(await serviceStats(served.url));
    const changesPath = join(dir, 'changes-2.csv');
    const sameDay = Math.floor((await serviceNowMs(served.url)) / 1000);
    const run = await runCli(
      [
        'remap-due',
        '--state',
        statePath,
        '-o',
        changesPath,
        '--now',
        String(sameDay),
        '--summary-json',
        join(dir, 'sum-2.json'),
      ],
      { served },
    );
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toMatch(/remap-due: 0 entries in/);
    // the first UTC day after now with entries whose r falls on it
    const rs = [...readEntries(statePath, served, keys).values()]
      .map((e) => e.r)
      .filter((r): r is number => r !== null && r > sameDay);
    const nextDay = new Date(Math.min(...rs) * 1000).toISOString().slice(0, 10);
    const nextCount = rs.filter((r) => new Date(r * 1000).toISOString().slice(0, 10) === nextDay).length;
    expect(run.stderr).toContain(
      `nothing was due at ${new Date(sameDay * 1000).toISOString().replace('.000Z', 'Z')}: the next ${nextCount.toLocaleString('en-US')} ${nextCount === 1 ? 'entry comes' : 'entries come'} due on ${nextDay} (00:00 UTC)`,
    );
    expect(run.stderr).toContain(`--now ${nextDay}T00:30:00Z`);
    expect(JSON.parse(readFileSync(join(dir, 'sum-2.json'), 'utf8'))).toMatchObject({
      next_due: { day: nextDay, count: nextCount },
    });
    expect(mapItems(await serviceStats(served.url))).toBe(sentBefore);
    expect(readFileSync(changesPath, 'utf8')).toBe(
      'hash_type,hash,old_raw_uid,raw_uid,prev_raw_uid,refresh_from,status\n',
    );
  });

  it('--dry-run counts what is due now and per day for the next 7 days, without sending', async () => {
    const entries = [...readEntries(statePath, served, keys).values()];
    const at = nowS + 10 * 86_400;
    const expectNow = entries.filter((e) => e.r !== null && e.r <= at).length;
    const sentBefore = mapItems(await serviceStats(served.url));
    const run = await runCli(
      [
        'remap-due',
        '--state',
        statePath,
        '--dry-run',
        '--now',
        new Date(at * 1000).toISOString(),
        '--summary-json',
        join(dir, 'dry.json'),
      ],
      {
        served,
        env: { UID2_API_KEY: '', UID2_CLIENT_SECRET: '' },
      },
    );
    expect(run.code, run.stderr).toBe(0);
    expect(mapItems(await serviceStats(served.url))).toBe(sentBefore);
    expect(run.stderr).toMatch(new RegExp(`${expectNow.toLocaleString('en-US')} entries due now`));
    const dry = JSON.parse(readFileSync(join(dir, 'dry.json'), 'utf8')) as {
      due_now: number;
      due_by_day: { day: string; count: number }[];
    };
    expect(dry.due_now).toBe(expectNow);
    expect(dry.due_by_day.length).toBe(7);
    for (let d = 1; d <= 7; d++) {
      const inDay = entries.filter((e) => e.r !== null && e.r > at + (d - 1) * 86_400 && e.r <= at + d * 86_400).length;
      expect(dry.due_by_day[d - 1].count).toBe(inDay);
    }
  });

  it('a second run while one holds the state exits 2 with a clear message and changes nothing', async () => {
    const holder = openState(statePath, { envFingerprint: loopbackFingerprint(served) });
    try {
      holder.lock();
      const run = await runCli(['remap-due', '--state', statePath, '--now', String(nowS + 40 * 86_400)], { served });
      expect(run.code, run.stderr).toBe(2);
      expect(run.stderr).toMatch(
        /another uid2-batch run \(pid \d+, started at .*\) is using .*state\.db; wait for it or remove .* if that process is gone/,
      );
      expect(run.stderr).not.toMatch(/\n\s+at /);
    } finally {
      holder.close();
    }
  });

  it('a second run through another name of the same file (hard link, symlink) is refused the same way', async () => {
    const hard = join(dir, 'state-hard-link.db');
    const soft = join(dir, 'state-sym-link.db');
    linkSync(statePath, hard);
    symlinkSync(statePath, soft);
    const holder = openState(statePath, { envFingerprint: loopbackFingerprint(served) });
    try {
      holder.lock();
      for (const other of [hard, soft]) {
        const run = await runCli(['remap-due', '--state', other, '--now', String(nowS + 40 * 86_400)], { served });
        expect(run.code, run.stderr).toBe(2);
        expect(run.stderr).toMatch(
          /another uid2-batch run \(pid \d+, started at .*\) is using .*state-(hard|sym)-link\.db; wait for it/,
        );
      }
    } finally {
      holder.close();
      rmSync(hard);
      rmSync(soft);
    }
  });

  it('opted-out identities: optout-check --state reports exactly them with their times and tombstones them; remap-due tombstones the due ones', async () => {
    const entries = readEntries(statePath, served, keys);
    // three identities that opt out now, long before their r: only a sweep can see them
    const soon = keys.filter((k) => (entries.get(keyOf(k))?.r ?? 0) > nowS + 200 * 86_400).slice(0, 3);
    const since = (i: number): number => Date.UTC(2026, 0, 20, 8, 0, i);
    for (const [i, k] of soon.entries()) await optOut(served.url, { [`${k.type}_hash`]: k.hash, since_ms: since(i) });
    const swept = join(dir, 'swept.csv');
    const check = await runCli(['optout-check', '--state', statePath, '-o', swept, '--only-opted-out'], { served });
    expect(check.code, check.stderr).toBe(0);
    const rows = readChanges(swept);
    // the service indexes the raw UIDs an identity had when it opted out: its current one and, within 90 days
    // of a rotation, its previous one; so the entry's u, and its p when it has one, come back opted out
    const expected = soon.flatMap((k, i) => {
      const e = entries.get(keyOf(k));
      return [
        {
          hash_type: k.type,
          hash: k.hash,
          raw_uid: e?.u,
          which: 'u',
          opted_out: 'true',
          opted_out_since: String(since(i) / 1000),
          reason: '',
        },
        ...(e?.p
          ? [
              {
                hash_type: k.type,
                hash: k.hash,
                raw_uid: e.p,
                which: 'p',
                opted_out: 'true',
                opted_out_since: String(since(i) / 1000),
                reason: '',
              },
            ]
          : []),
      ];
    });
    const order = (a: Record<string, unknown>, b: Record<string, unknown>): number =>
      String(a.raw_uid).localeCompare(String(b.raw_uid));
    expect(rows.sort(order)).toEqual(expected.sort(order));
    const tomb = readEntries(statePath, served, soon);
    for (const k of soon) expect(tomb.get(keyOf(k))).toMatchObject({ status: 'optout', u: null, p: null, r: null });

    // two identities that opt out and are then due: the remap answers optout and tombstones them
    const dueLater = keys.filter((k) => {
      const r = entries.get(keyOf(k))?.r ?? 0;
      return r > nowS + 5 * 86_400 && r <= nowS + 9 * 86_400;
    });
    const quitters = dueLater.slice(0, 2);
    for (const k of quitters) await optOut(served.url, { [`${k.type}_hash`]: k.hash });
    const at = Math.floor((await advanceDays(served.url, 10)) / 1000);
    const changesPath = join(dir, 'changes-optout.csv');
    const run = await runCli(['remap-due', '--state', statePath, '-o', changesPath, '--now', String(at)], { served });
    expect(run.code, run.stderr).toBe(0);
    const changes = readChanges(changesPath);
    const optouts = changes.filter((r) => r.status === 'optout');
    expect(optouts.map((r) => `${r.hash_type}:${r.hash}`).sort()).toEqual(quitters.map(keyOf).sort());
    for (const r of optouts)
      expect(r).toMatchObject({
        raw_uid: '',
        refresh_from: '',
        old_raw_uid: entries.get(`${r.hash_type}:${r.hash}`)?.u,
      });
    const gone = readEntries(statePath, served, quitters);
    for (const k of quitters) expect(gone.get(keyOf(k))).toMatchObject({ status: 'optout', u: null, r: null });

    // a tombstone is never sent again, however late it gets
    const sentBefore = mapItems(await serviceStats(served.url));
    const later = Math.floor((await advanceDays(served.url, 400)) / 1000);
    const all = await runCli(
      ['remap-due', '--state', statePath, '-o', join(dir, 'changes-year.csv'), '--now', String(later), '-q'],
      { served },
    );
    expect(all.code, all.stderr).toBe(0);
    expect(mapItems(await serviceStats(served.url)) - sentBefore).toBe(keys.length - soon.length - quitters.length);
  });
});

describe('remap-due interrupted and resumed', () => {
  let slow: Served;
  let path: string;
  const many: StoredKey[] = Array.from({ length: 12_000 }, (_, i) => ({
    type: 'email' as const,
    hash: sha256Base64(`resume${i}@example.org`),
  }));

  beforeAll(async () => {
    slow = await startServe(['--latency-ms', '400']);
    await setServiceTime(slow.url, '2026-01-01T00:00:00Z');
    path = join(dir, 'resume.db');
    await buildState(path, slow, many);
    await advanceDays(slow.url, 366);
  }, 120_000);

  afterAll(async () => {
    await slow?.stop();
  });

  it('SIGINT lets the batch in flight commit and exits 130, writing no file; the same command again writes the whole night', async () => {
    const nowS = Math.floor((await serviceNowMs(slow.url)) / 1000);
    const stats0 = await serviceStats(slow.url);
    const sent0 = mapItems(stats0);
    const requests0 = stats0.requests[MAP_PATH] ?? 0;
    const out = join(dir, 'resume.csv');
    let stopped = false;
    const first = await runCli(['remap-due', '--state', path, '-o', out, '--concurrency', '1', '--now', String(nowS)], {
      served: slow,
      onSpawn: (child) => {
        const poll = setInterval(() => {
          void serviceStats(slow.url).then((s) => {
            if (!stopped && (s.requests[MAP_PATH] ?? 0) > requests0) {
              stopped = true;
              clearInterval(poll);
              if (child.pid !== undefined) process.kill(child.pid, 'SIGINT');
            }
          });
        }, 50);
        child.once('exit', () => clearInterval(poll));
      },
    });
    expect(first.code, first.stderr).toBe(130);
    expect(first.stderr).toMatch(/their changes wait in the state file.*re-run the same command/);
    const sent1 = mapItems(await serviceStats(slow.url)) - sent0;
    expect(sent1).toBeGreaterThan(0);
    expect(sent1).toBeLessThan(many.length);
    // whatever was sent was committed; its changes wait in the state file, and no file was written
    const state = openState(path, { envFingerprint: loopbackFingerprint(slow), readonly: true });
    const left = state.countDue(nowS);
    const pending = state.pendingChanges('remap').length;
    state.close();
    expect(left).toBe(many.length - sent1);
    expect(pending).toBe(sent1);
    expect(existsSync(out)).toBe(false);
    expect(readdirSync(dir).filter((name) => name.includes('resume.csv'))).toEqual([]);

    // the cron line: the same command again, into the same -o
    const second = await runCli(['remap-due', '--state', path, '-o', out, '--now', String(nowS), '-q'], {
      served: slow,
    });
    expect(second.code, second.stderr).toBe(0);
    // the file holds each change of the night exactly once: every entry got a new raw UID after a year
    const keys = readChanges(out).map((r) => `${r.hash_type}:${r.hash}`);
    expect(keys.length).toBe(many.length);
    expect(new Set(keys).size).toBe(many.length);
    expect(mapItems(await serviceStats(slow.url)) - sent0).toBe(many.length);
    const after = openState(path, { envFingerprint: loopbackFingerprint(slow), readonly: true });
    expect(after.countDue(nowS)).toBe(0);
    expect(after.pendingChanges('remap')).toEqual([]);
    after.close();
  });

  it('SIGKILL mid-run: the stale lock is taken over, the next run sends exactly what is still due, and no change is lost', async () => {
    const killedPath = join(dir, 'killed.db');
    const undisturbedPath = join(dir, 'undisturbed.db');
    const others: StoredKey[] = Array.from({ length: 12_000 }, (_, i) => ({
      type: 'phone' as const,
      hash: sha256Base64(`+4420${String(i).padStart(8, '0')}`),
    }));
    await buildState(killedPath, slow, others);
    // the same night without the kill, for comparison (buildState closed the file: it is whole, with no WAL)
    copyFileSync(killedPath, undisturbedPath);
    const nowS = Math.floor((await advanceDays(slow.url, 366)) / 1000);
    const stats0 = await serviceStats(slow.url);
    let killed = false;
    const first = await runCli(
      ['remap-due', '--state', killedPath, '-o', join(dir, 'killed.csv'), '--concurrency', '1', '--now', String(nowS)],
      {
        served: slow,
        onSpawn: (child) => {
          const poll = setInterval(() => {
            void serviceStats(slow.url).then((s) => {
              // the second request is out: the first batch has been answered and committed
              if (!killed && (s.requests[MAP_PATH] ?? 0) >= (stats0.requests[MAP_PATH] ?? 0) + 2) {
                killed = true;
                clearInterval(poll);
                if (child.pid !== undefined) process.kill(child.pid, 'SIGKILL');
              }
            });
          }, 50);
          child.once('exit', () => clearInterval(poll));
        },
      },
    );
    expect(first.code).toBeNull();
    const probe = openState(killedPath, { envFingerprint: loopbackFingerprint(slow), readonly: true });
    const left = probe.countDue(nowS);
    probe.close();
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThan(others.length);

    // the killed run never renamed its changes file: the changes of its committed batches wait in the state
    expect(existsSync(join(dir, 'killed.csv'))).toBe(false);
    const waiting = openState(killedPath, { envFingerprint: loopbackFingerprint(slow), readonly: true });
    const pending = waiting.pendingChanges('remap').length;
    waiting.close();
    expect(pending).toBe(others.length - left);

    const sent0 = mapItems(await serviceStats(slow.url));
    const second = await runCli(
      ['remap-due', '--state', killedPath, '-o', join(dir, 'killed-2.csv'), '--now', String(nowS)],
      { served: slow },
    );
    expect(second.code, second.stderr).toBe(0);
    expect(second.stderr).toContain(
      `${pending.toLocaleString('en-US')} changes of an interrupted earlier run included`,
    );
    expect(mapItems(await serviceStats(slow.url)) - sent0).toBe(left);
    const after = openState(killedPath, { envFingerprint: loopbackFingerprint(slow), readonly: true });
    expect(after.countDue(nowS)).toBe(0);
    // delivered: acknowledged once the changes file was committed
    expect(after.pendingChanges('remap')).toEqual([]);
    after.close();

    const third = await runCli(
      ['remap-due', '--state', killedPath, '-o', join(dir, 'killed-3.csv'), '--now', String(nowS), '-q'],
      { served: slow },
    );
    expect(third.code, third.stderr).toBe(0);
    expect(readChanges(join(dir, 'killed-3.csv'))).toEqual([]);

    const calm = await runCli(
      ['remap-due', '--state', undisturbedPath, '-o', join(dir, 'undisturbed.csv'), '--now', String(nowS), '-q'],
      { served: slow },
    );
    expect(calm.code, calm.stderr).toBe(0);
    const rowsOf = (file: string): string[] =>
      readChanges(join(dir, file))
        .map((r) => JSON.stringify(r))
        .sort();
    const night = rowsOf('undisturbed.csv');
    // every entry got a new raw UID after a year: the comparison covers all of them
    expect(night.length).toBe(others.length);
    expect(rowsOf('killed-2.csv')).toEqual(night);
  });

  it('SIGINT with -o naming an existing file leaves it as it was; the next run into it writes each change once', async () => {
    const keptPath = join(dir, 'kept.db');
    const theirs: StoredKey[] = Array.from({ length: 12_000 }, (_, i) => ({
      type: 'email' as const,
      hash: sha256Base64(`kept${i}@example.org`),
    }));
    await buildState(keptPath, slow, theirs);
    const nowS = Math.floor((await advanceDays(slow.url, 366)) / 1000);
    const nightly = join(dir, 'nightly.csv');
    writeFileSync(nightly, 'an earlier night\n');
    const requests0 = (await serviceStats(slow.url)).requests[MAP_PATH] ?? 0;
    let stopped = false;
    const first = await runCli(
      ['remap-due', '--state', keptPath, '-o', nightly, '--concurrency', '1', '--now', String(nowS)],
      {
        served: slow,
        onSpawn: (child) => {
          const poll = setInterval(() => {
            void serviceStats(slow.url).then((s) => {
              if (!stopped && (s.requests[MAP_PATH] ?? 0) > requests0) {
                stopped = true;
                clearInterval(poll);
                if (child.pid !== undefined) process.kill(child.pid, 'SIGINT');
              }
            });
          }, 50);
          child.once('exit', () => clearInterval(poll));
        },
      },
    );
    expect(first.code, first.stderr).toBe(130);
    expect(first.stderr).toMatch(/their changes wait in the state file/);
    // a stopped run never replaces an existing file: the changes of its committed batches stay pending
    expect(readFileSync(nightly, 'utf8')).toBe('an earlier night\n');
    const probe = openState(keptPath, { envFingerprint: loopbackFingerprint(slow), readonly: true });
    const pending = probe.pendingChanges('remap').length;
    probe.close();
    expect(pending).toBeGreaterThan(0);

    // nothing of theirs was delivered: the completed run into the same -o writes them first
    const second = await runCli(['remap-due', '--state', keptPath, '-o', nightly, '--now', String(nowS), '-q'], {
      served: slow,
    });
    expect(second.code, second.stderr).toBe(0);
    const keys = readChanges(nightly).map((r) => `${r.hash_type}:${r.hash}`);
    expect(keys.length).toBe(theirs.length);
    expect(new Set(keys).size).toBe(theirs.length);
    const after = openState(keptPath, { envFingerprint: loopbackFingerprint(slow), readonly: true });
    expect(after.pendingChanges('remap')).toEqual([]);
    after.close();
  });
});
