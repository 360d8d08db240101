import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeBody, decodeKey, decryptResponse, encryptRequest } from '../../src/protocol/index.js';
import { startServe, type ServeProcess } from '../helpers/map-e2e-processes.js';
import { requireBuilt, scaled, seeded } from './harness.js';
import { recordWhenPassed } from './results.js';

/**
 * The local service as a separate process (`uid2-batch serve`), hit by 10,000 seeded random and mutated
 * requests: valid requests of every route and the same with flipped bits, cut or grown envelopes, JSON of every
 * wrong shape inside good envelopes, deep nesting, wrong and missing keys, odd headers and methods, damaged
 * refresh tokens, bodies over 1 MB. Every request must get an answer (no dropped connection), never a 5xx (no
 * faults are injected here), the process must stay up, and its memory must not grow with the requests. Then the
 * operator's own refusals, exactly: stale and future timestamps, wrong keys, oversized bodies.
 */

const REQUESTS = scaled(10_000);
const IN_FLIGHT = 16;
const SEED = 0xf022;
/** RSS may grow while V8 and the salt cache warm up; past the warm-up the requests must not add more than this. */
const RSS_GROWTH_LIMIT_MB = 48;
const WARM_UP = 1_000;

const API_KEY = `UID2-L-L-${randomBytes(15).toString('base64url')}`;
const CLIENT_SECRET = randomBytes(32).toString('base64');
const KEY = decodeKey(CLIENT_SECRET);

let serve: ServeProcess;
const agent = new Agent({ connections: IN_FLIGHT, keepAliveTimeout: 10_000 });
const figures = {
  fuzz_requests: 0,
  answered: 0,
  status_200: 0,
  status_4xx: 0,
  status_5xx: 0,
  dropped: 0,
  rss_before_mb: 0,
  rss_after_mb: 0,
  oversized_413: 0,
};

function rssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmRSS:\s+(\d+)\s+kB/.exec(status)?.[1] ?? NaN);
  return kb / 1024;
}

interface Shot {
  path: string;
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  headers: Record<string, string>;
  body?: Buffer | string;
}

interface Answer {
  status: number;
  body: Buffer;
  contentType: string | undefined;
}

async function send(shot: Shot): Promise<Answer> {
  const res = await request(`${serve.url}${shot.path}`, {
    method: shot.method,
    headers: shot.headers,
    body: shot.body,
    dispatcher: agent,
  });
  const body = Buffer.from(await res.body.arrayBuffer());
  const ct = res.headers['content-type'];
  return { status: res.statusCode, body, contentType: Array.isArray(ct) ? ct[0] : ct };
}

const auth = (key = API_KEY): Record<string, string> => ({ authorization: `Bearer ${key}` });

function envelope(json: string, options: { nowMs?: number; key?: Buffer } = {}): { bytes: Buffer; nonce: Buffer } {
  const { envelope: bytes, nonce } = encryptRequest(options.key ?? KEY, json, { nowMs: options.nowMs ?? Date.now() });
  return { bytes, nonce };
}

function post(path: string, body: Buffer | string, binary: boolean, headers: Record<string, string> = auth()): Shot {
  return {
    path,
    method: 'POST',
    headers: { ...headers, 'content-type': binary ? 'application/octet-stream' : 'text/plain' },
    body: binary ? body : Buffer.isBuffer(body) ? body.toString('base64') : body,
  };
}

const b64hash = (s: string): string => createHash('sha256').update(s).digest('base64');

// ---------------------------------------------------------------------------------------------------------------
// The corpus

const random = seeded(SEED);
const { int, pick, next } = random;
const ROUTES = [
  '/v3/identity/map',
  '/v2/identity/map',
  '/v2/identity/buckets',
  '/v2/optout/status',
  '/v2/token/generate',
  '/v2/token/validate',
];
const FIELDS = [
  'email',
  'email_hash',
  'phone',
  'phone_hash',
  'advertising_ids',
  'since_timestamp',
  'token',
  'policy',
  'optout_check',
  '__proto__',
  'constructor',
  'toString',
  '',
];
/**
 * A since_timestamp an hour back: the buckets endpoint answers every bucket rotated since, and from a date months
 * back that is the whole table (~1M buckets, ~64 MB, 2 s of the service's time): faithful, but not what fuzzing
 * is for.
 */
const RECENT = new Date(Date.now() - 3_600_000).toISOString().slice(0, 19);
const STRINGS = [
  '',
  'a@b.com',
  'optout@example.com',
  'validate@example.com',
  '+12345678901',
  '+00000000000',
  b64hash('x@example.com'),
  'b4c9a289323b21a01c3e940f150eb9b8c542587f1abfd8f0e1cc1ffc5e475514',
  RECENT,
  '2026-02-30T25:61',
  '2026-01-01T00:00:00Z',
  '\u0000',
  '\ud800',
  '😊',
  '%00',
  '../../etc/passwd',
  'A'.repeat(5000),
];

/** A request JSON that the route accepts. */
function validJson(route: string, token: string): string {
  switch (route) {
    case '/v3/identity/map':
      return JSON.stringify({
        email_hash: Array.from({ length: 1 + int(40) }, (_, i) => b64hash(`fuzz${int(1e6)}-${i}@example.com`)),
        phone: [`+1415555${String(1000 + int(8999))}`],
      });
    case '/v2/identity/map':
      return JSON.stringify({ email: Array.from({ length: 1 + int(10) }, () => `fuzz${int(1e6)}@example.com`) });
    case '/v2/identity/buckets':
      return JSON.stringify({ since_timestamp: RECENT });
    case '/v2/optout/status':
      return JSON.stringify({ advertising_ids: Array.from({ length: 1 + int(20) }, () => b64hash(String(int(1e9)))) });
    case '/v2/token/generate':
      return JSON.stringify(
        pick([
          { email: `gen${int(1e6)}@example.com` },
          { phone: '+12345678901' },
          { email_hash: b64hash('y@example.com') },
          { email: 'optout@example.com' },
        ]),
      );
    default:
      return JSON.stringify({ token, email: 'validate@example.com' });
  }
}

function randomValue(depth: number): unknown {
  switch (int(depth > 3 ? 5 : 9)) {
    case 0:
      return null;
    case 1:
      return pick([0, -1, 1.5, 1e308, -0, 2 ** 53 + 1, Number.MAX_SAFE_INTEGER, 365]);
    case 2:
      return next() < 0.5;
    case 3:
    case 4:
      return next() < 0.7 ? pick(STRINGS) : randomBytes(int(80)).toString('latin1');
    case 5:
    case 6:
      return Array.from({ length: int(10) }, () => randomValue(depth + 1));
    case 7:
      return Array.from({ length: 4000 + int(2000) }, () => b64hash(String(int(1e6))));
    default: {
      const o: Record<string, unknown> = {};
      for (let i = int(4); i >= 0; i--)
        Object.defineProperty(o, pick(FIELDS), {
          value: randomValue(depth + 1),
          enumerable: true,
          configurable: true,
          writable: true,
        });
      return o;
    }
  }
}

/** JSON that is wrong in some way: wrong types, deep nesting, duplicate keys, cut text, not an object. */
function wrongJson(route: string, token: string): string {
  switch (int(7)) {
    case 0:
      return JSON.stringify(randomValue(0)) ?? 'null';
    case 1: {
      const depth = 1000 + int(60_000);
      const field = pick(FIELDS);
      return `{"${field}":${'['.repeat(depth)}${']'.repeat(depth)}}`;
    }
    case 2: {
      const text = validJson(route, token);
      return text.slice(0, int(text.length));
    }
    case 3:
      return `{"email_hash":["${b64hash('a')}"],"email_hash":"dup","phone":[${'"+12345678901",'.repeat(int(3))}null]}`;
    case 4: {
      const o: Record<string, unknown> = JSON.parse(validJson(route, token)) as Record<string, unknown>;
      const k = pick(Object.keys(o));
      if (k !== undefined) o[k] = randomValue(1);
      return JSON.stringify(o);
    }
    case 5:
      return pick(['[]', '""', '0', 'true', 'null', '{}', '{"a":', '\u0000{}', '\ufeff{}']);
    default:
      return `{"${pick(FIELDS)}":"${'\\u0000\\ud800'.repeat(int(200))}"}`;
  }
}

function mutate(bytes: Buffer): Buffer {
  const out = Buffer.from(bytes);
  switch (int(6)) {
    case 0:
      for (let i = 1 + int(4); i > 0; i--) out[int(out.length)]! ^= 1 << int(8);
      return out;
    case 1:
      return out.subarray(0, int(out.length));
    case 2:
      return Buffer.concat([out, randomBytes(1 + int(100))]);
    case 3:
      out[0] = int(256);
      return out;
    case 4:
      return Buffer.concat([out.subarray(0, 13), out.subarray(13 + int(8))]);
    default:
      return Buffer.concat([out, out]);
  }
}

function mutateText(text: string): string {
  const at = int(text.length);
  switch (int(4)) {
    case 0:
      return text.slice(0, at) + pick(['A', '=', '/', '+', '-', '_', ' ', '\n']) + text.slice(at + 1);
    case 1:
      return text.slice(0, at);
    case 2:
      return text + text;
    default:
      return text.replace(/[A-Za-z]/g, (c) =>
        next() < 0.02 ? (c.toLowerCase() === c ? c.toUpperCase() : c.toLowerCase()) : c,
      );
  }
}

function makeShot(token: string, refreshToken: string): Shot {
  const route = pick(ROUTES);
  const binary = next() < 0.5;
  const kind = int(100);
  if (kind < 25) return post(route, envelope(validJson(route, token)).bytes, binary);
  if (kind < 45) return post(route, mutate(envelope(validJson(route, token)).bytes), binary);
  if (kind < 65) return post(route, envelope(wrongJson(route, token)).bytes, binary);
  if (kind < 72) {
    // time outside the window, either way, or absurd
    const skew = pick([-121_000, 121_000, -3_600_000, 86_400_000, -Date.now(), 2 ** 52]);
    return post(route, envelope(validJson(route, token), { nowMs: Date.now() + skew }).bytes, binary);
  }
  if (kind < 78) {
    const body = pick([randomBytes(int(300)), randomBytes(int(120)).toString('base64'), validJson(route, token), '']);
    return {
      path: route,
      method: 'POST',
      headers: {
        ...auth(),
        'content-type': pick([
          'application/json',
          'text/plain',
          'application/octet-stream',
          'application/x-www-form-urlencoded',
          'multipart/form-data; boundary=x',
        ]),
      },
      body,
    };
  }
  if (kind < 85) {
    const headers = pick([
      {},
      auth('wrong'),
      { authorization: 'Bearer' },
      { authorization: `Basic ${API_KEY}` },
      { authorization: API_KEY },
      { authorization: `bearer   ${API_KEY}   ` },
      auth(`${API_KEY}x`),
    ]);
    const key = next() < 0.5 ? KEY : randomBytes(32);
    return post(route, envelope(validJson(route, token), { key }).bytes, binary, headers);
  }
  if (kind < 94) {
    const body = pick([
      refreshToken,
      mutateText(refreshToken),
      randomBytes(291).toString('base64'),
      'x'.repeat(388),
      '',
      refreshToken.slice(0, 200),
      `${refreshToken}\n`,
    ]);
    return { path: '/v2/token/refresh', method: 'POST', headers: next() < 0.5 ? auth() : {}, body };
  }
  if (kind < 97)
    return {
      path: pick([
        '/',
        '/v2',
        '/v3/identity/map/../../_local/stats',
        `/v2/${'a'.repeat(4000)}`,
        '/v3/identity/map?x=%zz',
        '/ops/healthcheck',
        '/_local/clock',
        '/_local/nothing',
      ]),
      method: pick(['GET', 'POST', 'PUT', 'DELETE']),
      headers: {},
    };
  return { path: route, method: pick(['GET', 'PUT', 'DELETE']), headers: auth() };
}

// ---------------------------------------------------------------------------------------------------------------

let token = '';
let refreshToken = '';

recordWhenPassed('service_hardening', () => figures);

beforeAll(async () => {
  requireBuilt();
  serve = await startServe(['--api-key', API_KEY, '--client-secret', CLIENT_SECRET, '--seed', 'reliability-fuzz']);
  // a real advertising token and refresh token, to validate and to damage
  const { bytes, nonce } = envelope(JSON.stringify({ email: 'validate@example.com' }));
  const answer = await send(post('/v2/token/generate', bytes, true));
  expect(answer.status).toBe(200);
  const opened = decryptResponse(KEY, decodeBody(answer.body, answer.contentType), nonce);
  const body = (
    JSON.parse(opened.json.toString('utf8')) as {
      body: { advertising_token: string; refresh_token: string; refresh_response_key: string };
    }
  ).body;
  token = body.advertising_token;
  refreshToken = body.refresh_token;
  expect(refreshToken).toHaveLength(388);
}, 60_000);

afterAll(async () => {
  await agent.close();
  await serve?.stop();
});

describe('local service under seeded fuzzing (a separate serve process)', () => {
  it(`${REQUESTS} random and mutated requests: all answered, none 5xx, the process up, memory flat`, async () => {
    const failures: string[] = [];
    let done = 0;
    const fire = async (n: number): Promise<void> => {
      const shots = Array.from({ length: n }, () => makeShot(token, refreshToken));
      // oversized bodies: a few per thousand, each just over 1 MB
      if (int(1000) < 4) shots.push(post(pick(ROUTES), Buffer.alloc(1_048_577, 0x41), true));
      for (let i = 0; i < shots.length; i += IN_FLIGHT) {
        await Promise.all(
          shots.slice(i, i + IN_FLIGHT).map(async (shot) => {
            figures.fuzz_requests++;
            try {
              const answer = await send(shot);
              figures.answered++;
              if (answer.status === 200) figures.status_200++;
              else if (answer.status < 500) figures.status_4xx++;
              if (answer.status === 413) figures.oversized_413++;
              if (answer.status >= 500) {
                figures.status_5xx++;
                failures.push(
                  `${shot.method} ${shot.path.slice(0, 80)} -> ${answer.status} ${answer.body.toString('utf8').slice(0, 160)}`,
                );
              }
            } catch (err) {
              figures.dropped++;
              failures.push(`${shot.method} ${shot.path.slice(0, 80)} -> no answer: ${(err as Error).message}`);
            }
          }),
        );
      }
      done += n;
    };
    await fire(WARM_UP);
    figures.rss_before_mb = Math.round(rssMb(serve.pid));
    while (done < REQUESTS) await fire(Math.min(500, REQUESTS - done));
    figures.rss_after_mb = Math.round(rssMb(serve.pid));
    expect(failures.slice(0, 20)).toEqual([]);
    expect(figures.answered).toBe(figures.fuzz_requests);
    // the corpus reached the handlers, not only the gate
    expect(figures.status_200).toBeGreaterThan(REQUESTS / 5);
    expect(figures.status_4xx).toBeGreaterThan(REQUESTS / 5);
    expect(figures.rss_after_mb - figures.rss_before_mb).toBeLessThan(RSS_GROWTH_LIMIT_MB);
    // still serving
    const health = await send({ path: '/ops/healthcheck', method: 'GET', headers: {} });
    expect(health.status).toBe(200);
    const { bytes, nonce } = envelope(JSON.stringify({ email_hash: [b64hash('after@example.com')] }));
    const mapped = await send(post('/v3/identity/map', bytes, true));
    expect(mapped.status).toBe(200);
    const json = JSON.parse(
      decryptResponse(KEY, decodeBody(mapped.body, mapped.contentType), nonce).json.toString('utf8'),
    ) as { body: { email_hash: { u: string }[] } };
    expect(json.body.email_hash[0]!.u).toMatch(/^[A-Za-z0-9+/]{43}=$/);
  }, 600_000);
});

describe('refused as the operator refuses', () => {
  const map = JSON.stringify({ email_hash: [b64hash('window@example.com')] });
  const timestampMessage = 'Invalid timestamp: Request too old or client time drift.';

  for (const [what, skewMs, accepted] of [
    ['30 s behind', -30_000, true],
    ['30 s ahead', 30_000, true],
    ['stale: 2 min 10 s behind', -130_000, false],
    ['future: 2 min 10 s ahead', 130_000, false],
    ['stale: a day behind', -86_400_000, false],
    ['future: a year ahead', 365 * 86_400_000, false],
  ] as const) {
    it(`a request envelope ${what}: ${accepted ? '200' : `400 "${timestampMessage}"`}`, async () => {
      const { bytes, nonce } = envelope(map, { nowMs: Date.now() + skewMs });
      const answer = await send(post('/v3/identity/map', bytes, true));
      if (accepted) {
        expect(answer.status).toBe(200);
        expect(() => decryptResponse(KEY, decodeBody(answer.body, answer.contentType), nonce)).not.toThrow();
        return;
      }
      expect(answer.status).toBe(400);
      expect(answer.contentType).toMatch(/application\/json/);
      expect(JSON.parse(answer.body.toString('utf8'))).toEqual({ status: 'client_error', message: timestampMessage });
    });
  }

  it('a wrong API key, a missing one, or one without "Bearer ": 401 {"status":"unauthorized"} before the envelope is read', async () => {
    for (const headers of [auth('UID2-C-L-999-wrong'), {}, { authorization: API_KEY }]) {
      const answer = await send(post('/v3/identity/map', 'not even base64', false, headers));
      expect(answer.status).toBe(401);
      expect(JSON.parse(answer.body.toString('utf8'))).toEqual({ status: 'unauthorized' });
    }
  });

  it('a wrong client secret: 400 "Invalid body: Check encryption key (ClientSecret)."', async () => {
    const answer = await send(post('/v3/identity/map', envelope(map, { key: randomBytes(32) }).bytes, true));
    expect(answer.status).toBe(400);
    expect((JSON.parse(answer.body.toString('utf8')) as { message: string }).message).toMatch(
      /^Invalid body: Check encryption key \(ClientSecret\)\./,
    );
  });

  it('a body over 1,048,576 bytes: 413 in plain text, before the key is even looked at', async () => {
    for (const headers of [auth(), {}]) {
      const answer = await send(post('/v3/identity/map', Buffer.alloc(1_048_577, 0x42), true, headers));
      expect(answer.status).toBe(413);
      expect(answer.contentType).toMatch(/text\/plain/);
      expect(answer.body.toString('utf8')).toBe('Request Entity Too Large');
    }
  });
});
