import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Base64 } from '../../src/identity/index.js';
import { openState } from '../../src/state/index.js';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import {
  advanceDays,
  loopbackFingerprint,
  readEntries,
  runCli,
  serviceNowMs,
  serviceStats,
  startServe,
  type Served,
  type StoredKey,
} from '../helpers/remap-e2e.js';

/** `buckets --state`: marking a v2 state's stale entries by hand, and what remap-due does with the marks. */

const N = 1_500;
const emails = Array.from({ length: N }, (_, i) => `bucket-check-${i}@example.com`);
const keys: StoredKey[] = emails.map((e) => ({ type: 'email', hash: sha256Base64(e) }));

let dir: string;
let served: Served;
let statePath: string;

beforeAll(async () => {
  ensureBuilt();
  dir = mkdtempSync(join(tmpdir(), 'uid2-v2-buckets-e2e-'));
  served = await startServe();
  writeFileSync(join(dir, 'in.csv'), `${['email', ...emails].join('\n')}\n`);
  statePath = join(dir, 'v2.db');
}, 60_000);

afterAll(async () => {
  await served?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function lastCheck(): string | null {
  const s = openState(statePath, { envFingerprint: loopbackFingerprint(served), readonly: true });
  try {
    return s.getMeta('last_buckets_check');
  } finally {
    s.close();
  }
}

describe('buckets --state (built CLI against serve)', () => {
  it('refuses a missing or unreadable --since, and a v3 state file', async () => {
    const none = await runCli(['buckets'], { served });
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/buckets needs --since TIME/);
    const bad = await runCli(['buckets', '--since', 'last tuesday'], { served });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--since must be an ISO 8601 date-time .* \(got 'last tuesday'\)/);
    const v3 = join(dir, 'v3.db');
    expect(
      (await runCli(['map', join(dir, 'in.csv'), '--state', v3, '-o', join(dir, 'v3.csv')], { served })).code,
    ).toBe(0);
    const onV3 = await runCli(['buckets', '--since', '2026-01-01', '--state', v3], { served });
    expect(onV3.code).toBe(2);
    expect(onV3.stderr).toMatch(/is a v3 state file: its entries are due by refresh time/);
  });

  it('marks the entries of buckets rotated after they were mapped, records the check, and remap-due re-maps exactly them', async () => {
    const mappedAtMs = await serviceNowMs(served.url);
    expect(
      (
        await runCli(['map', '--api', 'v2', join(dir, 'in.csv'), '--state', statePath, '-o', join(dir, 'out.csv')], {
          served,
        })
      ).code,
    ).toBe(0);
    const nowMs = await advanceDays(served.url, 30);

    // asked from after the mapping: the stretch between is not covered, so the check is not recorded
    const late = await runCli(
      [
        'buckets',
        '--since',
        new Date(mappedAtMs + 10 * 86_400_000).toISOString(),
        '--state',
        statePath,
        '-o',
        join(dir, 'late.csv'),
      ],
      { served },
    );
    expect(late.code, late.stderr).toBe(0);
    expect(late.stderr).toMatch(
      /--since is after the oldest mapping .*: buckets rotated in between were not asked for, so the check time was not moved/,
    );
    expect(lastCheck()).toBeNull();
    const markedLate = Number(/([\d,]+) entr(?:y|ies) of .* marked due/.exec(late.stderr)?.[1].replace(/,/g, ''));

    // from the mapping on: everything is covered; the check is recorded an hour before it was made
    const full = await runCli(
      [
        'buckets',
        '--since',
        new Date(mappedAtMs).toISOString(),
        '--state',
        statePath,
        '-o',
        join(dir, 'full.csv'),
        '--summary-json',
        join(dir, 'full.json'),
      ],
      { served },
    );
    expect(full.code, full.stderr).toBe(0);
    const rotated = new Set(
      readFileSync(join(dir, 'full.csv'), 'utf8')
        .trim()
        .split('\n')
        .slice(1)
        .map((line) => line.split(',')[0]),
    );
    const entries = readEntries(statePath, served, keys);
    const stale = keys.filter((k) => rotated.has(entries.get(`email:${k.hash}`)?.bucketId ?? ''));
    expect(stale.length).toBeGreaterThan(0);
    expect(stale.every((k) => entries.get(`email:${k.hash}`)?.due)).toBe(true);
    expect([...entries.values()].filter((e) => e.due)).toHaveLength(stale.length);
    const summary = JSON.parse(readFileSync(join(dir, 'full.json'), 'utf8')) as Record<string, unknown>;
    expect(summary).toMatchObject({
      command: 'buckets',
      check_recorded: true,
      due: stale.length,
      marked_due: stale.length - markedLate,
    });
    const recorded = Date.parse(lastCheck() as string);
    expect(Date.now() - 3_600_000 - recorded).toBeGreaterThanOrEqual(0);
    expect(Date.now() - 3_600_000 - recorded).toBeLessThan(60_000);

    // the dry run counts the marks; the real run re-maps exactly the marked entries
    const dry = await runCli(
      ['remap-due', '--state', statePath, '--dry-run', '--now', String(Math.floor(nowMs / 1000))],
      { served },
    );
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stderr).toMatch(new RegExp(`${stale.length.toLocaleString('en-US')} entries marked due`));
    const before = (await serviceStats(served.url)).items['/v2/identity/map'] ?? 0;
    const run = await runCli(
      ['remap-due', '--state', statePath, '--now', String(Math.floor(nowMs / 1000)), '-o', join(dir, 'changes.csv')],
      { served },
    );
    expect(run.code, run.stderr).toBe(0);
    expect(((await serviceStats(served.url)).items['/v2/identity/map'] ?? 0) - before).toBe(stale.length);
    expect([...readEntries(statePath, served, keys).values()].some((e) => e.due)).toBe(false);
  });
});
