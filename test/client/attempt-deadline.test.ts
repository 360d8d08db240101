// A server that keeps every gap short but never finishes: only a deadline on the whole attempt ends the wait.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTricklingServer, type TricklingServer } from '../helpers/trickling-server.js';
import { createServiceClient, NetworkError } from '../../src/client/index.js';

let server: TricklingServer;

beforeAll(async () => {
  server = await startTricklingServer();
});

afterAll(() => server.stop());

it('a trickling answer ends at the attempt deadline, as a timeout that is retried like one', async () => {
  const client = createServiceClient({
    baseUrl: server.url,
    apiKey: 'UID2-C-L-999-test.key',
    clientSecret: Buffer.alloc(32, 7).toString('base64'),
    requestTimeoutMs: 800,
    maxAttempts: 2,
    sleep: async () => undefined,
  });
  try {
    const err = await client.buckets('2026-01-01T00:00:00').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NetworkError);
    expect((err as NetworkError).failure).toBe('timeout');
    expect((err as NetworkError).retryable).toBe(true);
    expect((err as NetworkError).message).toMatch(
      /^timed out talking to the identity service at http:\/\/127\.0\.0\.1/,
    );
    expect(server.attempts()).toBe(2);
    expect(client.stats).toMatchObject({ requests: 2, retries: 1, networkErrors: 2 });
  } finally {
    await client.close();
  }
}, 20_000);
