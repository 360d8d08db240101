import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServiceClient } from '../../src/client/index.js';
import { sha256Base64 } from '../../src/identity/index.js';
import { isMappedV3 } from '../../src/protocol/index.js';
import { openState } from '../../src/state/index.js';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import { lookupMany } from '../state/lookups.js';
import {
  loopbackFingerprint,
  optOut,
  runCli,
  serviceStats,
  startServe,
  testClient,
  type Served,
} from '../helpers/remap-e2e.js';

const V2_MAP = '/v2/identity/map';
const V3_MAP = '/v3/identity/map';

const hex = (text: string): string => createHash('sha256').update(text).digest('hex');

/** Every identifier kind, with invalid and opted-out cells, and repeats within and across columns and rows. */
const INPUT = [
  ['id', 'email', 'phone', 'email_hash', 'phone_hash'],
  ['1', 'a@example.com', '+14155550101', sha256Base64('b@example.com'), hex('+14155550102')],
  ['2', 'optout@example.com', '+00000000000', sha256Base64('optout@example.com'), sha256Base64('+00000000000')],
  ['3', 'not-an-email', '4155550103', 'xyz', 'abc'],
  ['4', '  A@Example.com ', '+14155550102', hex('b@example.com'), sha256Base64('+14155550101')],
  ['5', 'gone@example.com', '', sha256Base64('c@example.com'), ''],
  ['6', 'c@example.com', '+14155550104', '', sha256Base64('+00000000000')],
];

type Expected = { status: 'mapped' | 'optout' | 'invalid' | 'missing'; key?: string };
const mapped = (type: 'email' | 'phone', normalized: string): Expected => ({
  status: 'mapped',
  key: `${type}:${sha256Base64(normalized)}`,
});
const optout = (type: 'email' | 'phone', normalized: string): Expected => ({
  status: 'optout',
  key: `${type}:${sha256Base64(normalized)}`,
});
const invalid: Expected = { status: 'invalid' };
const missing: Expected = { status: 'missing' };

/** Per row, per identifier column (email, phone, email_hash, phone_hash). */
const EXPECTED: Expected[][] = [
  [
    mapped('email', 'a@example.com'),
    mapped('phone', '+14155550101'),
    mapped('email', 'b@example.com'),
    mapped('phone', '+14155550102'),
  ],
  [
    optout('email', 'optout@example.com'),
    optout('phone', '+00000000000'),
    optout('email', 'optout@example.com'),
    optout('phone', '+00000000000'),
  ],
  [invalid, invalid, invalid, invalid],
  [
    mapped('email', 'a@example.com'),
    mapped('phone', '+14155550102'),
    mapped('email', 'b@example.com'),
    mapped('phone', '+14155550101'),
  ],
  // opted out through the service's registry, not a test identity
  [optout('email', 'gone@example.com'), missing, mapped('email', 'c@example.com'), missing],
  [mapped('email', 'c@example.com'), mapped('phone', '+14155550104'), missing, optout('phone', '+00000000000')],
];
const COLUMNS = ['email', 'phone', 'email_hash', 'phone_hash'];
const UNIQUE_SENT = new Set(EXPECTED.flat().flatMap((e) => (e.key === undefined ? [] : [e.key]))).size;

let dir: string;
let served: Served;
let client: ServiceClient;

beforeAll(async () => {
  ensureBuilt();
  dir = mkdtempSync(join(tmpdir(), 'uid2-v2-map-e2e-'));
  served = await startServe();
  client = testClient(served);
  await optOut(served.url, { email: 'gone@example.com' });
  writeFileSync(
    join(dir, 'in.csv'),
    `${INPUT.map((r) => r.map((c) => (/[,\s"]/.test(c) ? `"${c}"` : c)).join(',')).join('\n')}\n`,
  );
}, 60_000);

afterAll(async () => {
  await client?.close();
  await served?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** What a fresh v3 map says of each key right now: v2 and v3 give the same raw UID at the same time. */
async function v3Answers(keys: string[]): Promise<Map<string, string | null>> {
  const email = keys.filter((k) => k.startsWith('email:')).map((k) => k.slice(6));
  const phone = keys.filter((k) => k.startsWith('phone:')).map((k) => k.slice(6));
  const body = await client.mapV3({ email_hash: email, phone_hash: phone });
  const out = new Map<string, string | null>();
  email.forEach((h, i) => void out.set(`email:${h}`, isMappedV3(body.email_hash[i]) ? body.email_hash[i].u : null));
  phone.forEach((h, i) => void out.set(`phone:${h}`, isMappedV3(body.phone_hash[i]) ? body.phone_hash[i].u : null));
  return out;
}

describe('map --api v2 (built CLI against serve)', () => {
  it('maps every kind with one kind per request, keeps row positions, answers repeats alike, and warns once', async () => {
    const before = await serviceStats(served.url);
    const out = join(dir, 'out.csv');
    const statePath = join(dir, 'v2.db');
    const run = await runCli(
      [
        'map',
        '--api',
        'v2',
        join(dir, 'in.csv'),
        '--email-col',
        'email',
        '--phone-col',
        'phone',
        '--email-hash-col',
        'email_hash',
        '--phone-hash-col',
        'phone_hash',
        '--state',
        statePath,
        '-o',
        out,
      ],
      { served },
    );
    expect(run.code, run.stderr).toBe(0);
    const after = await serviceStats(served.url);

    // the warning: once, with the date and the v3 command
    const warnings = run.stderr.split('\n').filter((l) => l.includes('warning:'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/2026-09-30/);
    expect(warnings[0]).toMatch(/uid2-batch map command without --api v2/);

    // email and phone hashes went in separate requests (the service refuses two kinds in one with a 400, which
    // would have failed rows): two requests, each identifier once, nothing through v3
    expect((after.requests[V2_MAP] ?? 0) - (before.requests[V2_MAP] ?? 0)).toBe(2);
    expect((after.items[V2_MAP] ?? 0) - (before.items[V2_MAP] ?? 0)).toBe(UNIQUE_SENT);
    expect(after.requests[V3_MAP] ?? 0).toBe(before.requests[V3_MAP] ?? 0);

    const rows = parse(readFileSync(out, 'utf8'), { columns: true }) as Record<string, string>[];
    expect(Object.keys(rows[0])).toEqual([
      ...INPUT[0],
      ...COLUMNS.flatMap((c) => [`${c}_raw_uid`, `${c}_bucket_id`, `${c}_status`, `${c}_reason`]),
    ]);
    expect(rows.map((r) => r.id)).toEqual(['1', '2', '3', '4', '5', '6']);

    const keys = [...new Set(EXPECTED.flat().flatMap((e) => (e.status === 'mapped' && e.key ? [e.key] : [])))];
    const v3 = await v3Answers(keys);
    const bucketOf = new Map<string, string>();
    rows.forEach((row, r) => {
      COLUMNS.forEach((col, c) => {
        const want = EXPECTED[r][c];
        const where = `row ${r + 1} ${col}`;
        expect(row[`${col}_status`], where).toBe(want.status);
        if (want.status === 'mapped') {
          expect(row[`${col}_raw_uid`], where).toBe(v3.get(want.key as string));
          expect(row[`${col}_bucket_id`], where).toMatch(/^[A-Za-z0-9]{10}$/);
          const seen = bucketOf.get(want.key as string);
          if (seen !== undefined) expect(row[`${col}_bucket_id`], where).toBe(seen);
          bucketOf.set(want.key as string, row[`${col}_bucket_id`]);
        } else {
          expect(row[`${col}_raw_uid`], where).toBe('');
          expect(row[`${col}_bucket_id`], where).toBe('');
          if (want.status === 'optout') expect(row[`${col}_reason`], where).toBe('optout');
          if (want.status === 'invalid') expect(row[`${col}_reason`], where).not.toBe('');
        }
      });
    });

    // the state holds each mapped identifier with its salt bucket and when it was received, and no r
    const state = openState(statePath, { envFingerprint: loopbackFingerprint(served), readonly: true });
    try {
      expect(state.meta().api).toBe('v2');
      const stored = lookupMany(
        state,
        keys.map((k) => ({ type: k.slice(0, 5) as 'email' | 'phone', hash: k.slice(6) })),
      );
      expect(stored.size).toBe(keys.length);
      for (const [key, entry] of stored) {
        expect(entry).toMatchObject({
          status: 'mapped',
          u: v3.get(key),
          r: null,
          p: null,
          bucketId: bucketOf.get(key),
          due: false,
        });
        expect(Math.abs((entry.lastMappedS ?? 0) - Date.now() / 1000)).toBeLessThan(120);
      }
    } finally {
      state.close();
    }

    // a re-run answers everything from the state: nothing is sent
    const again = await runCli(
      [
        'map',
        '--api',
        'v2',
        join(dir, 'in.csv'),
        '--email-col',
        'email',
        '--phone-col',
        'phone',
        '--email-hash-col',
        'email_hash',
        '--phone-hash-col',
        'phone_hash',
        '--state',
        statePath,
        '-o',
        join(dir, 'again.csv'),
      ],
      { served },
    );
    expect(again.code, again.stderr).toBe(0);
    expect((await serviceStats(served.url)).requests[V2_MAP]).toBe(after.requests[V2_MAP]);
    expect(readFileSync(join(dir, 'again.csv'), 'utf8')).toBe(readFileSync(out, 'utf8'));
  });

  it('keeps v2 and v3 state files apart, each with a message that says what to do', async () => {
    const v2File = join(dir, 'v2.db');
    const v3Run = await runCli(
      ['map', join(dir, 'in.csv'), '--email-col', 'email', '--state', v2File, '-o', join(dir, 'x.csv')],
      { served },
    );
    expect(v3Run.code).toBe(2);
    expect(v3Run.stderr).toMatch(/holds v2 \(salt bucket\) mappings.*uid2-batch migrate --state/);

    const v3File = join(dir, 'v3.db');
    expect(
      (
        await runCli(
          ['map', join(dir, 'in.csv'), '--email-col', 'email', '--state', v3File, '-o', join(dir, 'y.csv')],
          { served },
        )
      ).code,
    ).toBe(0);
    const v2Run = await runCli(
      ['map', '--api', 'v2', join(dir, 'in.csv'), '--email-col', 'email', '--state', v3File, '-o', join(dir, 'z.csv')],
      { served },
    );
    expect(v2Run.code).toBe(2);
    expect(v2Run.stderr).toMatch(/holds v3 mappings.*drop --api v2/);

    const bad = await runCli(['map', '--api', 'v4', join(dir, 'in.csv'), '--email-col', 'email'], { served });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--api must be v3 or v2 \(got 'v4'\)/);
  });
});
