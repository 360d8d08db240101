import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { sha256Base64 } from '../../src/identity/index.js';
import { startService, type LocalService, type ServiceOptions } from '../../src/service/index.js';
import { admin, call, get, post } from './helpers.js';

const V3 = '/v3/identity/map';
const START = Date.UTC(2026, 8, 1, 0, 0, 0);

const services: LocalService[] = [];
afterEach(async () => {
  await Promise.all(services.splice(0).map((s) => s.close()));
});
async function start(options: ServiceOptions = {}): Promise<LocalService> {
  const s = await startService({ nowMs: START, ...options });
  services.push(s);
  return s;
}
const hashes = (n: number, tag: string) => Array.from({ length: n }, (_, i) => sha256Base64(`${tag}${i}@example.com`));

/** What one API request met: an HTTP status, or "drop" when the connection was cut without an answer. */
async function outcome(s: LocalService, path = V3, json: unknown = { email: [] }): Promise<number | 'drop'> {
  try {
    return (await call(s, path, json)).status;
  } catch (err) {
    expect(String((err as Error).message)).toMatch(/other side closed|socket hang up|ECONNRESET|closed/i);
    return 'drop';
  }
}

describe('injected faults', () => {
  it('p429 = 1: bare 429 with no body on every API route, never on /_local/ or the healthcheck', async () => {
    const s = await start({ faults: { p429: 1 } });
    for (const path of [
      V3,
      '/v2/identity/map',
      '/v2/identity/buckets',
      '/v2/optout/status',
      '/v2/token/generate',
      '/v2/token/refresh',
    ]) {
      const answer = await post(s, path, 'anything', { authorization: `Bearer ${s.apiKey}` });
      expect(answer.status).toBe(429);
      expect(answer.body.length).toBe(0);
    }
    expect((await get(s, '/ops/healthcheck')).text).toBe('OK');
    expect((await admin(s, '/_local/clock')).status).toBe(200);
    expect(s.stats().faults['429']).toBe(6);
  });

  it('p500 = 1: 500 {"status":"unknown","message":"Injected fault"}', async () => {
    const s = await start({ faults: { p500: 1 } });
    const answer = await call(s, V3, { email: [] });
    expect(answer.status).toBe(500);
    expect(answer.raw.contentType).toBe('application/json');
    expect(answer.json).toEqual({ status: 'unknown', message: 'Injected fault' });
  });

  it('pDrop = 1: the connection is cut without an answer, and the service keeps serving', async () => {
    const s = await start({ faults: { pDrop: 1 } });
    expect(await outcome(s)).toBe('drop');
    expect(await outcome(s)).toBe('drop');
    expect((await get(s, '/ops/healthcheck')).status).toBe(200);
    expect(s.stats().faults.drop).toBe(2);
  });

  it('draws are seeded: the same seed gives the same sequence, another seed another one', async () => {
    const faults = { p429: 0.3, p500: 0.2, pDrop: 0.2 };
    const sequence = async (seed: string) => {
      const s = await start({ faults, seed });
      const seen: (number | 'drop')[] = [];
      for (let i = 0; i < 30; i++) seen.push(await outcome(s));
      return seen;
    };
    const a = await sequence('fault-seed');
    expect(await sequence('fault-seed')).toEqual(a);
    expect(await sequence('other-fault-seed')).not.toEqual(a);
    expect(new Set(a)).toEqual(new Set([200, 429, 500, 'drop']));
  });

  it('latencyMs delays every API answer, errors included, but not /_local/', async () => {
    const s = await start({ faults: { latencyMs: 150 } });
    let t = performance.now();
    expect((await call(s, V3, { email: [] })).status).toBe(200);
    expect(performance.now() - t).toBeGreaterThanOrEqual(140);
    t = performance.now();
    expect((await post(s, V3, 'x')).status).toBe(401);
    expect(performance.now() - t).toBeGreaterThanOrEqual(140);
    t = performance.now();
    await admin(s, '/_local/stats');
    expect(performance.now() - t).toBeLessThan(140);
  });

  it('close() ends pending delayed answers and open connections', async () => {
    const s = await startService({ nowMs: START, faults: { latencyMs: 10_000 } });
    const pending = request(`${s.url}/v2/token/refresh`, { method: 'POST', body: 'x' }).then(
      () => 'answered',
      () => 'cut',
    );
    await new Promise((r) => setTimeout(r, 50));
    const t = performance.now();
    await s.close();
    expect(performance.now() - t).toBeLessThan(2_000);
    expect(await pending).toBe('cut');
  });

  it('rateLimitItemsPerS: a token bucket over identity-map items, answered with a bare 429', async () => {
    const s = await start({ faults: { rateLimitItemsPerS: 1000 }, maxMapItems: 1000 });
    expect((await call(s, V3, { email_hash: hashes(1000, 'rl') })).status).toBe(200);
    const limited = await call(s, '/v2/identity/map', { email_hash: hashes(1000, 'rl') });
    expect(limited.status).toBe(429);
    expect(limited.raw.body.length).toBe(0);
    // other routes are not counted
    expect((await call(s, '/v2/optout/status', { advertising_ids: hashes(100, 'x') })).status).toBe(200);
    await new Promise((r) => setTimeout(r, 120));
    expect((await call(s, V3, { email_hash: hashes(20, 'rl') })).status).toBe(200);
    expect(s.stats().faults.rateLimited).toBe(1);
  });

  it('refuses impossible fault settings', async () => {
    await expect(startService({ faults: { p429: 1.5 } })).rejects.toThrow(/probability/);
    await expect(startService({ faults: { p429: 0.6, p500: 0.6 } })).rejects.toThrow(/add up to more than 1/);
    await expect(startService({ faults: { latencyMs: -1 } })).rejects.toThrow(/latencyMs/);
  });
});

describe('stats', () => {
  it('counts every request by path whatever its outcome, and the identifiers received', async () => {
    const s = await start();
    await call(s, V3, { email: ['a@example.com', 'b@example.com'], phone: ['+12025550100'] });
    await call(s, V3, { email_hash: hashes(4, 's') });
    await post(s, V3, 'x'); // 401
    await post(s, V3, 'A'.repeat((1 << 20) + 1)); // 413
    await call(s, '/v2/optout/status', { advertising_ids: ['a', 'b'] });
    await get(s, '/ops/healthcheck');
    await post(s, '/nowhere', '');
    const local = await admin(s, '/_local/stats');
    expect(local.json.requests).toEqual({
      [V3]: 4,
      '/v2/optout/status': 1,
      '/ops/healthcheck': 1,
      '/nowhere': 1,
      '/_local/stats': 1,
    });
    expect(local.json.items).toEqual({ [V3]: 7, '/v2/optout/status': 2 });
    expect(Math.abs((local.json.now_ms as number) - s.nowMs())).toBeLessThan(5_000);
    const inProcess = s.stats();
    expect(inProcess.requests[V3]).toBe(4);
    expect(inProcess.items[V3]).toBe(7);
  });

  it('two services in one process keep separate state', async () => {
    const a = await start();
    const b = await start();
    await call(a, V3, { email: ['x@example.com'] });
    await admin(a, '/_local/optout', { email: 'shared@example.com' });
    await admin(a, '/_local/clock', { advance_days: 10 });
    expect(b.stats().requests).toEqual({});
    expect(b.nowMs()).toBeLessThan(a.nowMs() - 9 * 86_400_000);
    const inB = await call(b, V3, { email: ['shared@example.com'] });
    expect((inB.json as { body: { email: unknown[] } }).body.email[0]).toHaveProperty('u');
  });
});
