// The built CLI against a loopback server that answers a few bytes at a time and never finishes: --timeout-ms
// bounds each attempt as a whole, so the run ends, with the batch's rows in error and exit 3.
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTricklingServer, type TricklingServer } from '../helpers/trickling-server.js';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import { runCli } from '../helpers/map-e2e-processes.js';

let server: TricklingServer;

beforeAll(async () => {
  ensureBuilt();
  server = await startTricklingServer();
});

afterAll(() => server.stop());

it('map against a trickling answer: each attempt ends at --timeout-ms, then the rows are error (exit 3)', async () => {
  const run = await runCli(
    ['map', '-', '--email-col', 'email', '-q', '--base-url', server.url, '--timeout-ms', '700', '--max-attempts', '2'],
    {
      input: 'id,email\n1,a@example.com\n2,b@example.com\n',
      env: { UID2_API_KEY: 'UID2-C-L-999-test.key', UID2_CLIENT_SECRET: Buffer.alloc(32, 7).toString('base64') },
    },
  );
  expect(run.code, run.stderr).toBe(3);
  expect(server.attempts()).toBe(2);
  const rows = parse(run.stdout, { columns: true }) as Record<string, string>[];
  expect(rows.map((r) => r.status)).toEqual(['error', 'error']);
  for (const row of rows)
    expect(row.reason).toMatch(/timed out talking to the identity service at http:\/\/127\.0\.0\.1/);
}, 30_000);
