// mapRows keeps the CLI's rule: plain http:// only to this machine unless the caller opts in.
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mapRows } from 'uid2-batch';

const SECRET = Buffer.alloc(32, 7).toString('base64');

async function drain(rows: AsyncIterable<unknown>): Promise<number> {
  let n = 0;
  for await (const _ of rows) n++;
  return n;
}

describe('mapRows and plain http', () => {
  let server: Server;
  let requests = 0;
  beforeAll(async () => {
    server = createServer((_req, res) => {
      requests++;
      res.statusCode = 500;
      res.end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('refuses http:// to another machine without insecureHttp, before anything is sent', async () => {
    const run = mapRows([['jane@example.com']], {
      columns: [{ index: 0, kind: 'email' }],
      baseUrl: 'http://example.com',
      apiKey: 'key',
      clientSecret: SECRET,
      maxAttempts: 1,
    });
    await expect(drain(run)).rejects.toMatchObject({
      code: 'invalid_argument',
      message: expect.stringMatching(/plain http:\/\/ to example\.com.*insecureHttp: true/),
    });
  });

  it('names the option, not a CLI flag, in the message', async () => {
    const run = mapRows([['jane@example.com']], {
      columns: [{ index: 0, kind: 'email' }],
      baseUrl: 'http://10.1.2.3:8080',
      apiKey: 'key',
      clientSecret: SECRET,
    });
    await expect(drain(run)).rejects.toThrow(/insecureHttp/);
    expect(requests).toBe(0);
  });

  it('allows http:// to this machine', async () => {
    const { port } = server.address() as { port: number };
    const run = mapRows([['jane@example.com']], {
      columns: [{ index: 0, kind: 'email' }],
      baseUrl: `http://127.0.0.1:${port}`,
      apiKey: 'key',
      clientSecret: SECRET,
      maxAttempts: 1,
    });
    const rows: { results: { status: string }[] }[] = [];
    for await (const row of run) rows.push(row);
    expect(rows.map((r) => r.results[0].status)).toEqual(['error']);
    expect(requests).toBe(1);
  });
});
