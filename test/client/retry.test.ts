import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import {
  AbortError,
  ATTEMPT_TIMEOUT_CODE,
  backoffDelayMs,
  NetworkError,
  parseRetryAfter,
  RETRY_AFTER_CAP_MS,
  type ClientOptions,
  type RetryEvent,
  type ServiceClient,
} from '../../src/client/index.js';
import {
  ClientError,
  ClockSkewError,
  PayloadTooLargeError,
  RateLimitedError,
  ServerError,
  UnauthorizedError,
} from '../../src/protocol/index.js';
import { seeded } from '../helpers/seeded-random.js';
import { useFakeService } from './fake-service-clients.js';

const fake = useFakeService();

interface Harness {
  client: ServiceClient;
  sleeps: number[];
  events: RetryEvent[];
}

function harness(options: Partial<ClientOptions> = {}): Harness {
  const sleeps: number[] = [];
  const events: RetryEvent[] = [];
  const client = fake.client({
    sleep: async (ms) => void sleeps.push(ms),
    onRetry: (e) => void events.push(e),
    ...options,
  });
  return { client, sleeps, events };
}

const SINCE = '2026-01-01T00:00:00';
const bucketsAnswer = { kind: 'answer', json: { status: 'success', body: [] } } as const;

describe('what is retried', () => {
  it('retries a 429, then succeeds', async () => {
    const { client, events } = harness();
    fake.service.script({ kind: 'status', httpStatus: 429 }, bucketsAnswer);
    expect(await client.buckets(SINCE)).toEqual([]);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ path: '/v2/identity/buckets', attempt: 1, httpStatus: 429 });
    expect(events[0]!.error).toBeInstanceOf(RateLimitedError);
    expect(client.stats).toEqual({ requests: 2, retries: 1, http429: 1, http5xx: 0, networkErrors: 0 });
  });

  it('retries a 500, then succeeds', async () => {
    const { client, events } = harness();
    fake.service.script(
      { kind: 'status', httpStatus: 500, body: '{"status":"unknown","message":"Unknown error"}' },
      bucketsAnswer,
    );
    expect(await client.buckets(SINCE)).toEqual([]);
    expect(events[0]!.error).toBeInstanceOf(ServerError);
    expect(client.stats).toMatchObject({ requests: 2, retries: 1, http5xx: 1 });
  });

  it('retries a dropped connection, then succeeds', async () => {
    const { client, events } = harness();
    fake.service.script({ kind: 'destroy' }, bucketsAnswer);
    expect(await client.buckets(SINCE)).toEqual([]);
    expect(events[0]!.error).toBeInstanceOf(NetworkError);
    expect(events[0]!.httpStatus).toBeUndefined();
    expect(client.stats).toMatchObject({ requests: 2, retries: 1, networkErrors: 1 });
  });

  it('builds a fresh envelope (timestamp, nonce, IV) for every attempt', async () => {
    let clock = 1_000_000;
    const { client } = harness({ now: () => (clock += 1000) });
    const before = fake.service.calls.length;
    fake.service.script({ kind: 'status', httpStatus: 429 }, { kind: 'status', httpStatus: 503 }, bucketsAnswer);
    await client.buckets(SINCE);
    const attempts = fake.service.calls.slice(before);
    expect(attempts).toHaveLength(3);
    const stamps = attempts.map((c) => c.envelope!.timestampMs);
    expect(stamps[1]! - stamps[0]!).toBeGreaterThan(0);
    expect(stamps[2]! - stamps[1]!).toBeGreaterThan(0);
    expect(new Set(attempts.map((c) => c.envelope!.nonce.toString('hex'))).size).toBe(3);
    // a different IV makes the whole body different even for the same JSON
    expect(new Set(attempts.map((c) => c.raw.subarray(1, 13).toString('hex'))).size).toBe(3);
    expect(
      attempts.every((c) => JSON.stringify(c.envelope!.payload) === JSON.stringify({ since_timestamp: SINCE })),
    ).toBe(true);
  });

  it('retries the token refresh too, with the same body', async () => {
    const { client } = harness();
    const generated = await client.tokenGenerate({ email: 'retry@example.com' });
    if (generated.status !== 'success') throw new Error('expected success');
    const before = fake.service.calls.length;
    fake.service.script({ kind: 'status', httpStatus: 502 });
    const refreshed = await client.tokenRefresh(
      generated.identity.refresh_token,
      generated.identity.refresh_response_key,
    );
    expect(refreshed.status).toBe('success');
    const attempts = fake.service.calls.slice(before);
    expect(attempts.map((c) => c.raw.toString())).toEqual([
      generated.identity.refresh_token,
      generated.identity.refresh_token,
    ]);
  });
});

describe('what is not retried', () => {
  it.each([
    [
      400,
      '{"status":"client_error","message":"Invalid timestamp: Request too old or client time drift."}',
      ClockSkewError,
    ],
    [400, '{"status":"client_error","message":"Required Parameter Missing: advertising_ids"}', ClientError],
    [401, '{"status":"unauthorized"}', UnauthorizedError],
    [413, 'Request Entity Too Large', PayloadTooLargeError],
  ])('HTTP %i is thrown at once, typed', async (httpStatus, body, type) => {
    const { client, sleeps } = harness();
    fake.service.script({ kind: 'status', httpStatus, body });
    const err = await client.optoutStatus(['a']).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(type);
    expect(sleeps).toEqual([]);
    expect(client.stats).toEqual({ requests: 1, retries: 0, http429: 0, http5xx: 0, networkErrors: 0 });
  });

  it('ClockSkewError tells how to fix the clock', async () => {
    const { client } = harness();
    fake.service.script({
      kind: 'status',
      httpStatus: 400,
      body: '{"status":"client_error","message":"Invalid timestamp: Request too old or client time drift."}',
    });
    await expect(client.buckets(SINCE)).rejects.toThrow(/clock/);
  });

  it('a wrong API key is a 401 from the service, not retried', async () => {
    const { client } = harness({ apiKey: 'wrong-key' });
    await expect(client.buckets(SINCE)).rejects.toBeInstanceOf(UnauthorizedError);
    expect(client.stats.requests).toBe(1);
  });
});

describe('giving up', () => {
  it('throws the last typed error once maxAttempts is used up', async () => {
    const { client, sleeps } = harness({ maxAttempts: 3 });
    fake.service.script(
      { kind: 'status', httpStatus: 429 },
      { kind: 'status', httpStatus: 500 },
      { kind: 'status', httpStatus: 503, body: '{"status":"unknown","message":"last one"}' },
      bucketsAnswer,
    );
    const err = await client.buckets(SINCE).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServerError);
    expect((err as ServerError).httpStatus).toBe(503);
    expect((err as ServerError).serviceMessage).toBe('last one');
    expect(sleeps).toHaveLength(2);
    expect(client.stats).toEqual({ requests: 3, retries: 2, http429: 1, http5xx: 2, networkErrors: 0 });
    // the leftover scripted answer is for the next call
    expect(await client.buckets(SINCE)).toEqual([]);
  });

  it('CallOptions.maxAttempts overrides the client default', async () => {
    const { client } = harness({ maxAttempts: 6 });
    fake.service.script({ kind: 'status', httpStatus: 429 }, { kind: 'status', httpStatus: 429 });
    await expect(client.buckets(SINCE, { maxAttempts: 2 })).rejects.toBeInstanceOf(RateLimitedError);
    expect(client.stats.requests).toBe(2);
  });

  it('a refused connection ends in a NetworkError naming the base URL, never the key', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const { client, sleeps } = harness({ baseUrl: `http://127.0.0.1:${port}`, maxAttempts: 3 });
    const err = await client.mapV3({ email: ['a@example.com'] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NetworkError);
    const networkError = err as NetworkError;
    expect(networkError.retryable).toBe(true);
    expect(networkError.failure).toBe('refused');
    expect(networkError.message).toContain(`http://127.0.0.1:${port}/v3/identity/map`);
    expect(networkError.message).toMatch(/connection refused/);
    expect(networkError.message).not.toContain(fake.service.apiKey);
    expect(networkError.message).not.toContain(fake.service.clientSecret);
    expect(sleeps).toHaveLength(2);
    expect(client.stats).toMatchObject({ requests: 3, retries: 2, networkErrors: 3 });
  });

  it('an answer slower than requestTimeoutMs is a NetworkError (timeout), retried like one', async () => {
    const { client, events } = harness({ requestTimeoutMs: 100, maxAttempts: 2 });
    fake.service.script({ kind: 'hang' }, bucketsAnswer);
    expect(await client.buckets(SINCE)).toEqual([]);
    expect(client.stats).toMatchObject({ requests: 2, retries: 1, networkErrors: 1 });
    const err = events[0]!.error;
    expect(err).toBeInstanceOf(NetworkError);
    expect((err as NetworkError).failure).toBe('timeout');
    expect((err as NetworkError).code).toBe(ATTEMPT_TIMEOUT_CODE);
    expect(err.message).toMatch(
      /^timed out talking to the identity service at http:\/\/127\.0\.0\.1:\d+\/v2\/identity\/buckets/,
    );
  });
});

describe('backoff', () => {
  it('waits random(0, min(max, base * 2^(n-1))) before attempt n+1 (full jitter), reported to onRetry', async () => {
    const backoffBaseMs = 500;
    const backoffMaxMs = 30_000;
    const { client, sleeps, events } = harness({ maxAttempts: 9, backoffBaseMs, backoffMaxMs, random: seeded(42) });
    fake.service.script(
      ...Array.from({ length: 8 }, () => ({ kind: 'status', httpStatus: 503 }) as const),
      bucketsAnswer,
    );
    await client.buckets(SINCE);
    const caps = [500, 1000, 2000, 4000, 8000, 16_000, 30_000, 30_000];
    const sameDraws = seeded(42);
    expect(sleeps).toEqual(caps.map((cap) => Math.floor(sameDraws() * cap)));
    sleeps.forEach((ms, i) => {
      expect(ms).toBeGreaterThanOrEqual(0);
      expect(ms).toBeLessThan(caps[i]!);
    });
    // full jitter: the draws are spread over [0, cap), not clustered at the cap
    expect(sleeps.some((ms, i) => ms < caps[i]! / 2)).toBe(true);
    expect(events.map((e) => e.delayMs)).toEqual(sleeps);
    expect(events.map((e) => e.attempt)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });

  it('the bounds are reached at the extremes of the random draw', () => {
    const settings = { backoffBaseMs: 500, backoffMaxMs: 30_000 };
    expect([1, 2, 3, 7, 20].map((n) => backoffDelayMs(n, { ...settings, random: () => 0 }))).toEqual([0, 0, 0, 0, 0]);
    const top = 1 - Number.EPSILON;
    expect([1, 2, 3, 7, 20].map((n) => backoffDelayMs(n, { ...settings, random: () => top }))).toEqual([
      499, 999, 1999, 29_999, 29_999,
    ]);
  });

  it('honours Retry-After (seconds) as a lower bound', async () => {
    const { client, sleeps } = harness({ random: () => 0.5 });
    fake.service.script(
      { kind: 'status', httpStatus: 429, headers: { 'retry-after': '7' } },
      { kind: 'status', httpStatus: 503, headers: { 'retry-after': '0' } },
      bucketsAnswer,
    );
    await client.buckets(SINCE);
    // 7 s beats the 250 ms jitter of attempt 1; a Retry-After of 0 leaves attempt 2's 500 ms jitter alone
    expect(sleeps).toEqual([7000, 500]);
  });

  it('reads Retry-After as seconds or an HTTP date, and caps it', () => {
    const now = Date.parse('2026-03-01T12:00:00Z');
    expect(parseRetryAfter('3', now)).toBe(3000);
    expect(parseRetryAfter(['2', '9'], now)).toBe(2000);
    expect(parseRetryAfter('Sun, 01 Mar 2026 12:00:10 GMT', now)).toBe(10_000);
    expect(parseRetryAfter('Sun, 01 Mar 2026 11:00:00 GMT', now)).toBe(0);
    expect(parseRetryAfter('86400', now)).toBe(RETRY_AFTER_CAP_MS);
    expect(parseRetryAfter('soon', now)).toBeUndefined();
    expect(parseRetryAfter(undefined, now)).toBeUndefined();
  });
});

describe('abort', () => {
  it('rejects at once when the signal has already fired, without sending', async () => {
    const { client } = harness();
    const err = await client.buckets(SINCE, { signal: AbortSignal.abort() }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AbortError);
    expect(client.stats.requests).toBe(0);
  });

  it('rejects promptly while waiting between attempts, even if the sleep never ends', async () => {
    const controller = new AbortController();
    let sleeping!: () => void;
    const asleep = new Promise<void>((resolve) => (sleeping = resolve));
    const { client } = harness({
      sleep: () => {
        sleeping();
        return new Promise<void>(() => {});
      },
    });
    fake.service.script({ kind: 'status', httpStatus: 429 }, bucketsAnswer);
    const call = client.buckets(SINCE, { signal: controller.signal });
    await asleep;
    controller.abort();
    await expect(call).rejects.toBeInstanceOf(AbortError);
    expect(client.stats).toMatchObject({ requests: 1, retries: 1 });
    // the scripted answer is still there: no second attempt was made
    expect(await client.buckets(SINCE)).toEqual([]);
  });

  it('the default sleep stops on abort too', async () => {
    const controller = new AbortController();
    const { client } = harness({ sleep: undefined, backoffBaseMs: 60_000, backoffMaxMs: 60_000, random: () => 0.99 });
    fake.service.script({ kind: 'status', httpStatus: 503 }, bucketsAnswer);
    const call = client.buckets(SINCE, { signal: controller.signal, maxAttempts: 2 });
    setTimeout(() => controller.abort(), 50);
    await expect(call).rejects.toBeInstanceOf(AbortError);
    expect(await client.buckets(SINCE)).toEqual([]);
  });

  it('rejects promptly while a request is in flight', async () => {
    const controller = new AbortController();
    const { client } = harness();
    const before = fake.service.calls.length;
    fake.service.script({ kind: 'hang' });
    const call = client.buckets(SINCE, { signal: controller.signal });
    while (fake.service.calls.length === before) await new Promise((r) => setTimeout(r, 5));
    controller.abort();
    const err = await call.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AbortError);
    expect((err as AbortError).message).toContain(`${fake.service.url}/v2/identity/buckets`);
    expect(client.stats).toMatchObject({ requests: 1, retries: 0, networkErrors: 0 });
  });
});

describe('stats', () => {
  it('counts every attempt by outcome across calls', async () => {
    const { client } = harness();
    fake.service.script(
      { kind: 'status', httpStatus: 429 },
      { kind: 'status', httpStatus: 500 },
      { kind: 'destroy' },
      bucketsAnswer,
    );
    await client.buckets(SINCE);
    await client.optoutStatus(['a']);
    fake.service.script({ kind: 'status', httpStatus: 401, body: '{"status":"unauthorized"}' });
    await expect(client.optoutStatus(['a'])).rejects.toBeInstanceOf(UnauthorizedError);
    expect(client.stats).toEqual({ requests: 6, retries: 3, http429: 1, http5xx: 1, networkErrors: 1 });
  });
});
