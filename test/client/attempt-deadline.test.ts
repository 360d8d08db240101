// A server that keeps every gap short but never finishes: only a deadline on the whole attempt ends the wait.
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createServiceClient, NetworkError } from '../../src/client/index.js';

let server: Server;
let url: string;
let attempts = 0;
const open = new Set<ServerResponse>();

beforeAll(async () => {
  server = createServer((req, res) => {
    attempts++;
    req.resume();
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    // 50 bytes every 200 ms: far inside any gap timeout, so the answer is never late by that measure
    const timer = setInterval(() => res.write(Buffer.alloc(50, 1)), 200);
    open.add(res);
    res.on('close', () => {
      clearInterval(timer);
      open.delete(res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  for (const res of open) res.destroy();
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

it('a trickling answer ends at the attempt deadline, as a timeout that is retried like one', async () => {
  const client = createServiceClient({
    baseUrl: url,
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
    expect(attempts).toBe(2);
    expect(client.stats).toMatchObject({ requests: 2, retries: 1, networkErrors: 2 });
  } finally {
    await client.close();
  }
}, 20_000);
