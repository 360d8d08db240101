import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { LocalIdentityEngine } from '../../src/service/engine.js';
import { parseIsoLocalDateTimeMs } from '../../src/service/handlers/buckets.js';
import { startService, type LocalService } from '../../src/service/index.js';
import { OptoutRegistry } from '../../src/service/optout-registry.js';
import { BUCKET_COUNT } from '../../src/service/salt-buckets.js';
import { DAY_MS, admin, body, call } from './helpers.js';

const V3 = '/v3/identity/map';
const BUCKETS = '/v2/identity/buckets';
const START = Date.UTC(2026, 4, 20, 15, 45, 0);

interface Mapped {
  u: string;
  p: string | null;
  r: number;
}
type V3Body = Record<'email' | 'email_hash' | 'phone' | 'phone_hash', Mapped[]>;
type Buckets = { bucket_id: string; last_updated: string }[];

const services: LocalService[] = [];
afterEach(async () => {
  await Promise.all(services.splice(0).map((s) => s.close()));
});
async function start(nowMs = START): Promise<LocalService> {
  const s = await startService({ nowMs });
  services.push(s);
  return s;
}
const emails = (n: number, tag: string) => Array.from({ length: n }, (_, i) => `${tag}${i}@example.com`);
const isoLocal = (ms: number) => new Date(ms).toISOString().slice(0, 23);

describe('salt buckets (engine)', () => {
  const engine = new LocalIdentityEngine('rotation-test', 'UID2', new OptoutRegistry());

  it('bucket index is (F[0] << 12) | (F[1] << 4) | (F[2] & 0x0F) of the first-level hash', () => {
    for (let i = 0; i < 200; i++) {
      const f = randomBytes(32);
      expect(engine.buckets.bucketOf(f.toString('base64'))).toBe((f[0]! << 12) | (f[1]! << 4) | (f[2]! & 0x0f));
    }
  });

  it('about 1/365 of the buckets rotate on any day, and every bucket once per 365 days', () => {
    const counts = new Map<number, number>();
    for (let b = 0; b < BUCKET_COUNT; b++)
      counts.set(engine.buckets.phaseOf(b), (counts.get(engine.buckets.phaseOf(b)) ?? 0) + 1);
    expect(counts.size).toBe(365);
    const expected = BUCKET_COUNT / 365;
    for (const n of counts.values()) expect(Math.abs(n - expected)).toBeLessThan(expected * 0.1);
    const day = Math.floor(START / DAY_MS);
    for (let b = 0; b < 50; b++) {
      const last = engine.buckets.lastRotationDay(b, day);
      expect(day - last).toBeGreaterThanOrEqual(0);
      expect(day - last).toBeLessThan(365);
      expect(engine.buckets.lastRotationDay(b, last + 364)).toBe(last);
      expect(engine.buckets.lastRotationDay(b, last + 365)).toBe(last + 365);
    }
  });

  it('bucket ids are 10 alphanumeric characters, stable and distinct', () => {
    const ids = new Set<string>();
    for (let b = 0; b < 20000; b++) ids.add(engine.buckets.bucketId(b));
    expect(ids.size).toBe(20000);
    for (const id of [...ids].slice(0, 100)) expect(id).toMatch(/^[A-Za-z0-9]{10}$/);
    expect(engine.buckets.bucketId(77)).toBe(
      new LocalIdentityEngine('rotation-test', 'UID2', new OptoutRegistry()).buckets.bucketId(77),
    );
  });
});

describe('rotation over simulated days', () => {
  it('r is a future UTC midnight; p is set exactly within 90 days of the last rotation', async () => {
    const s = await start();
    const result = await body<V3Body>(s, V3, { email: emails(600, 'r') }, { mode: 'binary' });
    let withP = 0;
    for (const item of result.email) {
      expect(item.r * 1000).toBeGreaterThan(s.nowMs());
      expect(item.r % 86_400).toBe(0);
      const lastRotation = item.r * 1000 - 365 * DAY_MS;
      const wholeDays = Math.floor((s.nowMs() - lastRotation) / DAY_MS);
      expect(wholeDays).toBeGreaterThanOrEqual(0);
      if (wholeDays < 90) {
        expect(item.p).toMatch(/^[A-Za-z0-9+/]{43}=$/);
        expect(item.p).not.toBe(item.u);
        withP++;
      } else {
        expect(item.p).toBeNull();
      }
    }
    // 90/365 of the buckets are in their window: about 148 of 600
    expect(withP).toBeGreaterThan(90);
    expect(withP).toBeLessThan(210);
  });

  it('at r the raw UID changes, p becomes the one before, and p lapses after 90 days', async () => {
    const s = await start();
    const list = emails(800, 'rot');
    const before = (await body<V3Body>(s, V3, { email: list }, { mode: 'binary' })).email;
    const soonest = before.reduce((a, b) => (b.r < a.r ? b : a));
    const index = before.indexOf(soonest);
    const id = list[index]!;

    // the day before r: nothing changes for it
    await admin(s, '/_local/clock', { set: soonest.r * 1000 - 3_600_000 });
    expect((await body<V3Body>(s, V3, { email: [id] })).email[0]).toEqual(soonest);

    // just after r: a new salt
    await admin(s, '/_local/clock', { set: soonest.r * 1000 + 60_000 });
    const after = (await body<V3Body>(s, V3, { email: [id] })).email[0]!;
    expect(after.u).not.toBe(soonest.u);
    expect(after.p).toBe(soonest.u);
    expect(after.r).toBe(soonest.r + 365 * 86_400);

    // identities whose r has not come keep their raw UID
    const now = s.nowMs();
    const again = (await body<V3Body>(s, V3, { email: list }, { mode: 'binary' })).email;
    let unchanged = 0;
    before.forEach((old, i) => {
      if (old.r * 1000 > now) {
        expect(again[i]!.u).toBe(old.u);
        unchanged++;
      } else {
        expect(again[i]!.p).toBe(old.u);
      }
    });
    expect(unchanged).toBeGreaterThan(700);

    // day 89 after the rotation: p still offered; day 90: gone
    await admin(s, '/_local/clock', { set: soonest.r * 1000 + 89 * DAY_MS + 3_600_000 });
    expect((await body<V3Body>(s, V3, { email: [id] })).email[0]).toEqual(after);
    await admin(s, '/_local/clock', { set: soonest.r * 1000 + 90 * DAY_MS });
    expect((await body<V3Body>(s, V3, { email: [id] })).email[0]).toEqual({ ...after, p: null });
  });

  it('advance_days moves the clock by whole days and answers the new now', async () => {
    const s = await start();
    const before = s.nowMs();
    const moved = await admin(s, '/_local/clock', { advance_days: 30 });
    expect(moved.status).toBe(200);
    expect((moved.json.now_ms as number) - before).toBeGreaterThanOrEqual(30 * DAY_MS);
    expect((moved.json.now_ms as number) - before).toBeLessThan(30 * DAY_MS + 5_000);
    expect(s.nowMs()).toBeGreaterThanOrEqual(moved.json.now_ms as number);
    const read = await admin(s, '/_local/clock');
    expect(read.json.now_ms as number).toBeGreaterThanOrEqual(moved.json.now_ms as number);
    for (const bad of [{}, { advance_days: 'x' }, { advance_days: 1, set: '2026-01-01' }, { set: 'yesterday' }]) {
      expect((await admin(s, '/_local/clock', bad)).status).toBe(400);
    }
  });
});

describe('/v2/identity/buckets', () => {
  it('lists the buckets rotated at or after since_timestamp, before and after a simulated rotation', async () => {
    const s = await start();
    const list = emails(400, 'bk');
    const v3 = (await body<V3Body>(s, V3, { email: list }, { mode: 'binary' })).email;
    const soonest = v3.reduce((a, b) => (b.r < a.r ? b : a));
    const id = list[v3.indexOf(soonest)]!;
    const v2 = await body<{ mapped: { bucket_id: string }[] }>(s, '/v2/identity/map', { email: [id] });
    const bucketId = v2.mapped[0]!.bucket_id;
    const rotationMs = soonest.r * 1000;
    const previousMs = rotationMs - 365 * DAY_MS;

    // before the rotation: the bucket's last rotation is a year back, so it is not among the day's rotations
    await admin(s, '/_local/clock', { set: rotationMs - 3_600_000 });
    const dayBefore = await body<Buckets>(s, BUCKETS, { since_timestamp: isoLocal(rotationMs - DAY_MS).slice(0, 19) });
    expect(dayBefore.length).toBeGreaterThan(2500);
    expect(dayBefore.some((b) => b.bucket_id === bucketId)).toBe(false);
    for (const b of dayBefore) expect(b.last_updated).toBe(isoLocal(rotationMs - DAY_MS));

    // after it: listed since the rotation day, with that day as last_updated, and not after it
    await admin(s, '/_local/clock', { set: rotationMs + 1_000 });
    const today = await body<Buckets>(s, BUCKETS, { since_timestamp: isoLocal(rotationMs) });
    expect(today).toContainEqual({ bucket_id: bucketId, last_updated: isoLocal(rotationMs) });
    for (const b of today) expect(b.last_updated).toBe(`${isoLocal(rotationMs).slice(0, 10)}T00:00:00.000`);
    expect(today.length).toBeGreaterThan(2500);
    expect(today.length).toBeLessThan(3300);
    expect(new Set(today.map((b) => b.bucket_id)).size).toBe(today.length);
    expect(await body<Buckets>(s, BUCKETS, { since_timestamp: isoLocal(rotationMs + 1) })).toEqual([]);
    const twoDays = await body<Buckets>(
      s,
      BUCKETS,
      { since_timestamp: isoLocal(rotationMs - DAY_MS) },
      { mode: 'binary' },
    );
    expect(twoDays.length).toBe(today.length + dayBefore.length);
    expect(previousMs).toBe(rotationMs - 365 * DAY_MS);
  });

  it('a since time a year back covers every bucket once', () => {
    const engine = new LocalIdentityEngine('rotation-test', 'UID2', new OptoutRegistry());
    const seen = new Uint8Array(BUCKET_COUNT);
    let visits = 0;
    let wrongDay = 0;
    const today = Math.floor(START / DAY_MS);
    engine.buckets.forEachRotatedSince(START - 400 * DAY_MS, START, (bucket, day) => {
      seen[bucket]!++;
      visits++;
      if (day !== engine.buckets.lastRotationDay(bucket, today)) wrongDay++;
    });
    expect(visits).toBe(BUCKET_COUNT);
    expect(wrongDay).toBe(0);
    expect(seen.every((n) => n === 1)).toBe(true);
  });

  it('since_timestamp is an ISO local date-time without zone; other forms are refused with the operator words', async () => {
    const s = await start();
    for (const ok of ['2026-05-20T00:00', '2026-05-20t00:00:00', '2026-05-20T00:00:00.123456789']) {
      expect((await call(s, BUCKETS, { since_timestamp: ok }, { mode: 'binary' })).status).toBe(200);
    }
    expect(parseIsoLocalDateTimeMs('2024-02-29T23:59:59')).toBe(Date.UTC(2024, 1, 29, 23, 59, 59));
    const invalid = { status: 'client_error', message: 'invalid date, must conform to ISO 8601' };
    for (const bad of [
      '2026-05-01T00:00:00Z',
      '2026-05-01T00:00:00+00:00',
      '2026-05-01',
      '2026-05-01 00:00:00',
      '2026-02-29T00:00:00',
      '2026-13-01T00:00',
      '',
      1_700_000_000,
      true,
      {},
    ]) {
      expect((await call(s, BUCKETS, { since_timestamp: bad })).json).toEqual(invalid);
    }
    const missing = { status: 'client_error', message: 'missing parameter since_timestamp' };
    expect((await call(s, BUCKETS, {})).json).toEqual(missing);
    expect((await call(s, BUCKETS, { since_timestamp: null })).json).toEqual(missing);
  });

  it('sub-millisecond fractions round up so the comparison stays exact', () => {
    expect(parseIsoLocalDateTimeMs('2026-01-02T03:04:05')).toBe(Date.UTC(2026, 0, 2, 3, 4, 5));
    expect(parseIsoLocalDateTimeMs('2026-01-02T03:04:05.000000001')).toBe(Date.UTC(2026, 0, 2, 3, 4, 5) + 1);
    // years below 100 are years, not 19xx
    expect(new Date(parseIsoLocalDateTimeMs('0099-03-01T00:00')!).toISOString()).toBe('0099-03-01T00:00:00.000Z');
    expect(parseIsoLocalDateTimeMs('2026-04-31T00:00')).toBeNull();
    expect(parseIsoLocalDateTimeMs('2026-01-01T24:00')).toBeNull();
  });
});
