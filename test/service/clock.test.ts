import { afterEach, describe, expect, it } from 'vitest';
import { sha256Base64 } from '../../src/identity/index.js';
import { decodeBody, decodeKey, decryptResponse, encryptRequest } from '../../src/protocol/index.js';
import { SimulatedClock } from '../../src/service/clock.js';
import { startService, type LocalService, type ServiceOptions } from '../../src/service/index.js';
import { DAY_MS, admin, call, post } from './helpers.js';

/**
 * The service's two times: identity time (salts, r, p, tokens; moved by /_local/clock) and envelope time (the
 * request window and the response envelope's timestamp; real time plus the start offset, never moved).
 */

const V3 = '/v3/identity/map';
const TIMESTAMP = 'Invalid timestamp: Request too old or client time drift.';

type V3Item = { u: string; p: string | null; r: number };

const services: LocalService[] = [];
afterEach(async () => {
  await Promise.all(services.splice(0).map((s) => s.close()));
});
async function start(options: ServiceOptions = {}): Promise<LocalService> {
  const s = await startService({ seed: 'clock-test', ...options });
  services.push(s);
  return s;
}

/** A map request stamped with the machine's real clock, as the CLI sends it; answers the status, body and envelope time. */
async function mapOnRealClock(s: LocalService, hashes: string[]) {
  const key = decodeKey(s.clientSecret);
  const { envelope, nonce } = encryptRequest(key, JSON.stringify({ email_hash: hashes }), { nowMs: Date.now() });
  const raw = await post(s, V3, envelope.toString('base64'), {
    authorization: `Bearer ${s.apiKey}`,
    'content-type': 'text/plain',
  });
  if (raw.status !== 200)
    return { status: raw.status, json: JSON.parse(raw.text) as unknown, items: [] as V3Item[], envelopeMs: NaN };
  const opened = decryptResponse(key, decodeBody(raw.body, raw.contentType), nonce);
  const json = JSON.parse(opened.json.toString('utf8')) as { body: { email_hash: V3Item[] } };
  return { status: 200, json: json as unknown, items: json.body.email_hash, envelopeMs: opened.timestampMs };
}

describe('SimulatedClock', () => {
  it('set() moves identity time only; envelope time keeps the start offset', () => {
    let real = 1_000_000;
    const clock = new SimulatedClock(1_600_000, () => real);
    expect(clock.nowMs()).toBe(1_600_000);
    expect(clock.envelopeNowMs()).toBe(1_600_000);
    real = 1_005_000;
    const target = 1_600_000 + 30 * DAY_MS;
    expect(clock.set(target)).toBe(target);
    expect(clock.nowMs()).toBe(target);
    expect(clock.envelopeNowMs()).toBe(1_605_000);
    real = 1_006_000;
    expect(clock.nowMs()).toBe(target + 1_000);
    expect(clock.envelopeNowMs()).toBe(1_606_000);
  });
});

describe('identity time and envelope time', () => {
  it('after advance_days 30 a real-time envelope is accepted and the answer carries rotated identities', async () => {
    const s = await start();
    const hashes = Array.from({ length: 3000 }, (_, i) => sha256Base64(`clock${i}@example.com`));
    const before = await mapOnRealClock(s, hashes);
    expect(before.status).toBe(200);

    const moved = await admin(s, '/_local/clock', { advance_days: 30 });
    const identityNow = moved.json.now_ms as number;
    expect(identityNow - Date.now()).toBeGreaterThan(30 * DAY_MS - 60_000);

    const after = await mapOnRealClock(s, hashes);
    expect(after.status, JSON.stringify(after.json)).toBe(200);
    let rotated = 0;
    before.items.forEach((old, i) => {
      const now = after.items[i]!;
      expect(now.r * 1000).toBeGreaterThan(identityNow);
      if (old.r * 1000 <= identityNow) {
        expect(now.u).not.toBe(old.u);
        expect(now.p).toBe(old.u);
        rotated++;
      } else {
        // not rotated (its p may have lapsed meanwhile: the 90-day window moved on too)
        expect([now.u, now.r]).toEqual([old.u, old.r]);
      }
    });
    // about 30/365 of the identities rotated: ~246 of 3000
    expect(rotated).toBeGreaterThan(120);
    expect(rotated).toBeLessThan(400);
  });

  it('the response envelope carries envelope time (real time + start offset), not the advanced identity time', async () => {
    const s = await start();
    await admin(s, '/_local/clock', { advance_days: 30 });
    const t0 = Date.now();
    const answer = await mapOnRealClock(s, [sha256Base64('stamp@example.com')]);
    expect(answer.status).toBe(200);
    expect(Math.abs(answer.envelopeMs - t0)).toBeLessThan(5_000);
    expect(Math.abs(s.envelopeNowMs() - Date.now())).toBeLessThan(5_000);
    expect(s.nowMs() - s.envelopeNowMs()).toBeGreaterThan(30 * DAY_MS - 5_000);

    // started 2 days back: envelopes 2 days back too, however identity time moves
    const offset = -2 * DAY_MS;
    const back = await start({ nowMs: Date.now() + offset });
    await admin(back, '/_local/clock', { advance_days: 30 });
    const stamped = await call(back, V3, { email: ['stamp@example.com'] }, { nowMs: Date.now() + offset });
    expect(stamped.status).toBe(200);
    const key = decodeKey(back.clientSecret);
    const { envelope, nonce } = encryptRequest(key, '{"email":[]}', { nowMs: Date.now() + offset });
    const raw = await post(back, V3, envelope.toString('base64'), { authorization: `Bearer ${back.apiKey}` });
    const opened = decryptResponse(key, decodeBody(raw.body, raw.contentType), nonce);
    expect(Math.abs(opened.timestampMs - (Date.now() + offset))).toBeLessThan(5_000);
  });

  it('a service started 10 minutes ahead refuses real-time envelopes (a skewed operator clock), even after /_local/clock', async () => {
    const ahead = 10 * 60_000;
    const s = await start({ nowMs: Date.now() + ahead });
    const refused = await mapOnRealClock(s, [sha256Base64('skew@example.com')]);
    expect(refused.status).toBe(400);
    expect(refused.json).toEqual({ status: 'client_error', message: TIMESTAMP });
    // a client whose clock is as far ahead gets in
    expect((await call(s, V3, { email: [] }, { nowMs: Date.now() + ahead })).status).toBe(200);
    // setting identity time back to the real time does not cure the skew: it was fixed at start
    await admin(s, '/_local/clock', { set: Date.now() });
    const still = await mapOnRealClock(s, [sha256Base64('skew@example.com')]);
    expect(still.json).toEqual({ status: 'client_error', message: TIMESTAMP });
  });

  it('a stale envelope is still refused after identity time moves back to it', async () => {
    const s = await start();
    const staleMs = Date.now() - 10 * 60_000;
    await admin(s, '/_local/clock', { set: staleMs });
    const answer = await call(s, V3, { email: [] }, { nowMs: staleMs });
    expect(answer.json).toEqual({ status: 'client_error', message: TIMESTAMP });
  });
});
