import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeKey, encryptRequest } from '../../src/protocol/index.js';
import { startService, type LocalService } from '../../src/service/index.js';
import { body } from './helpers.js';

/**
 * Seeded fuzzing of every route: random bytes, random base64, damaged envelopes, and valid envelopes around
 * mutated JSON. The service must answer each one (no dropped connection) and never with a 5xx.
 */

const ROUTES = [
  '/v3/identity/map',
  '/v2/identity/map',
  '/v2/identity/buckets',
  '/v2/optout/status',
  '/v2/token/generate',
  '/v2/token/validate',
  '/v2/token/refresh',
  '/_local/optout',
  '/_local/clock',
  '/_local/stats',
  '/ops/healthcheck',
  '/v2/unknown',
];
const ROUNDS = 1200;

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const random = mulberry32(0x5eed);
const int = (n: number) => Math.floor(random() * n);
const pick = <T>(items: readonly T[]): T => items[int(items.length)]!;

const KEYS = [
  'email',
  'email_hash',
  'phone',
  'phone_hash',
  'advertising_ids',
  'since_timestamp',
  'token',
  'advance_days',
  'set',
  'since_ms',
  'advertising_id',
  'policy',
  '__proto__',
  'constructor',
  '',
];
const STRINGS = [
  '',
  'a@b.com',
  'optout@example.com',
  '+12345678901',
  '+00000000002',
  'tMmiiTI7IaAcPpQPFQ65uMVCWH8av9jw4cwf/F5HVRQ=',
  'b4c9a289323b21a01c3e940f150eb9b8c542587f1abfd8f0e1cc1ffc5e475514',
  '2026-01-01T00:00:00',
  '2026-02-30T00:00',
  '\u0000\uffff\ud800',
  '😊@x.com',
  'A'.repeat(500),
  '9999-12-31T23:59:59.999999999',
  '0000-01-01T00:00',
];

function randomValue(depth: number): unknown {
  switch (int(depth > 2 ? 5 : 8)) {
    case 0:
      return null;
    case 1:
      return pick([0, -1, 1.5, 1e308, -1e308, 2 ** 53, 1_700_000_000_000, 365]);
    case 2:
      return random() < 0.5;
    case 3:
    case 4:
      return random() < 0.7
        ? pick(STRINGS)
        : Buffer.from(Array.from({ length: int(60) }, () => int(256))).toString('latin1');
    case 5:
    case 6:
      return Array.from({ length: int(8) }, () => randomValue(depth + 1));
    default:
      return randomObject(depth + 1);
  }
}

function randomObject(depth = 0): Record<string, unknown> {
  const o: Record<string, unknown> = {};
  for (let i = int(4); i >= 0; i--)
    Object.defineProperty(o, pick(KEYS), {
      value: randomValue(depth),
      enumerable: true,
      configurable: true,
      writable: true,
    });
  return o;
}

function randomJsonText(): string {
  const text = JSON.stringify(random() < 0.85 ? randomObject() : randomValue(0)) ?? 'null';
  if (random() < 0.15) {
    // structural damage: cut, or splice a random character in
    const at = int(text.length + 1);
    return random() < 0.5
      ? text.slice(0, at)
      : `${text.slice(0, at)}${pick(['{', '"', ',', ']', '\\', '\u0000'])}${text.slice(at)}`;
  }
  return text;
}

interface Attempt {
  route: string;
  method: string;
  body: Buffer | string;
  headers: Record<string, string>;
}

function makeAttempt(service: LocalService, key: Buffer): Attempt {
  const route = pick(ROUTES);
  const headers: Record<string, string> = {};
  if (random() < 0.85)
    headers.authorization = pick([
      `Bearer ${service.apiKey}`,
      `bearer ${service.apiKey}`,
      'Bearer wrong',
      'Bearer',
      `${service.apiKey}`,
    ]);
  const binary = random() < 0.4;
  headers['content-type'] = binary
    ? 'application/octet-stream'
    : pick(['text/plain', 'application/json', 'application/x-www-form-urlencoded']);
  const method = route === '/ops/healthcheck' || random() < 0.05 ? pick(['GET', 'POST', 'PUT']) : 'POST';
  let payload: Buffer | string;
  const kind = int(6);
  if (kind === 0) {
    payload = Buffer.from(Array.from({ length: int(200) }, () => int(256)));
  } else if (kind === 1) {
    payload = Buffer.from(Array.from({ length: int(120) }, () => int(256))).toString('base64');
  } else if (kind === 2) {
    payload = randomJsonText();
  } else {
    const json = randomJsonText();
    // envelope time, not identity time: the fuzz also moves identity time through /_local/clock
    const ts = random() < 0.9 ? service.envelopeNowMs() : pick([0, -1, 2 ** 62, service.envelopeNowMs() - 200_000]);
    const { envelope } = encryptRequest(random() < 0.9 ? key : Buffer.alloc(32, 9), json, { nowMs: ts });
    if (kind === 3 && envelope.length > 0) {
      // bit flips, truncation, or a wrong version byte
      const damaged = Buffer.from(envelope);
      const how = int(3);
      if (how === 0) damaged[int(damaged.length)]! ^= 1 << int(8);
      if (how === 1) damaged[0] = int(256);
      payload = how === 2 ? damaged.subarray(0, int(damaged.length)) : damaged;
    } else {
      payload = envelope;
    }
    if (!binary) payload = Buffer.from(payload).toString('base64');
  }
  return { route, method, body: payload, headers };
}

let service: LocalService;
let key: Buffer;
beforeAll(async () => {
  service = await startService({ nowMs: Date.UTC(2026, 10, 1), maxMapItems: 50 });
  key = decodeKey(service.clientSecret);
});
afterAll(() => service.close());

describe('fuzz', () => {
  it(`${ROUNDS} seeded random and mutated requests: every one answered, none with a 5xx`, async () => {
    const failures: string[] = [];
    const statuses = new Map<number, number>();
    for (let done = 0; done < ROUNDS; ) {
      const batch = Array.from({ length: 20 }, () => makeAttempt(service, key));
      await Promise.all(
        batch.map(async (a) => {
          try {
            const res = await request(`${service.url}${a.route}`, {
              method: a.method as 'GET' | 'POST' | 'PUT',
              headers: a.headers,
              body: a.method === 'GET' ? undefined : a.body,
            });
            const text = await res.body.text();
            statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
            if (res.statusCode >= 500)
              failures.push(`${a.method} ${a.route} -> ${res.statusCode} ${text.slice(0, 200)}`);
          } catch (err) {
            failures.push(`${a.method} ${a.route} -> no answer: ${(err as Error).message}`);
          }
        }),
      );
      done += batch.length;
    }
    expect(failures).toEqual([]);
    // the corpus reached the handlers, not only the envelope gate
    expect(statuses.get(200) ?? 0).toBeGreaterThan(100);
    expect(statuses.get(400) ?? 0).toBeGreaterThan(100);
    const total = Object.values(service.stats().requests).reduce((a, b) => a + b, 0);
    expect(total).toBe(ROUNDS);
    // and the service still maps afterwards
    const mapped = await body<{ email: { u?: string }[] }>(service, '/v3/identity/map', {
      email: ['after-fuzz@example.com'],
    });
    expect(mapped.email[0]!.u).toMatch(/^[A-Za-z0-9+/]{43}=$/);
  });
});
