import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, ROOT } from '../helpers/map-e2e-build.js';
import { tempDir } from '../helpers/map-e2e-data.js';
import { runCli, type ServeProcess, serveConnection, startServe } from '../helpers/map-e2e-processes.js';

// A run that no batch of has got through, for a reason that cannot clear by itself within the run (nothing listens,
// no such host, TLS to a plain port, a proxy's 407, a client secret the service cannot decrypt with), stops at once:
// exit 1 (4 for the credentials), the cause on stderr and in --summary-json, no output file and no temp file.

const dir = tempDir('unreachable');
const SAMPLE = join(ROOT, 'samples', 'customers.csv');
const ANY_SECRET = Buffer.alloc(32, 7).toString('base64');
const creds = { UID2_API_KEY: 'test-key', UID2_CLIENT_SECRET: ANY_SECRET };
let serve: ServeProcess;
let proxy: Server;
let proxyUrl = '';
let closedPort = 0;

function listen(server: Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)));
}

beforeAll(async () => {
  ensureBuilt();
  serve = await startServe();
  // a proxy that wants credentials nobody gave it
  proxy = createServer((req, res) => {
    req.resume();
    res.writeHead(407, { 'proxy-authenticate': 'Basic realm="test"' }).end();
  });
  proxyUrl = `http://127.0.0.1:${await listen(proxy)}`;
  // a port that was free a moment ago: nothing listens on it
  const gone = createServer();
  closedPort = await listen(gone);
  await new Promise((resolve) => gone.close(resolve));
}, 120_000);

afterAll(async () => {
  await serve?.stop();
  await new Promise((resolve) => proxy?.close(resolve));
  dir.remove();
});

let n = 0;
async function mapOnce(connection: string[], env: Record<string, string>) {
  const name = `case-${++n}`;
  const out = join(dir.path, `${name}.csv`);
  const summary = join(dir.path, `${name}.json`);
  const r = await runCli(
    [
      'map',
      SAMPLE,
      ...connection,
      '--max-attempts',
      '2',
      '--batch-size',
      '100',
      '--concurrency',
      '1',
      '-o',
      out,
      '--rejects',
      join(dir.path, `${name}-rejects.csv`),
      '--summary-json',
      summary,
    ],
    { env },
  );
  const body = JSON.parse(readFileSync(summary, 'utf8')) as Record<string, unknown>;
  const left = readdirSync(dir.path).filter((f) => f.startsWith(`${name}`) || f.includes(`.${name}`));
  return { ...r, out, summary: body, left };
}

describe('nothing reachable: the run stops at the first failed batch, with no output', () => {
  const cases: { name: string; code: number; says: RegExp; args: () => string[]; env: () => Record<string, string> }[] =
    [
      {
        name: 'connection refused (a closed port)',
        code: 1,
        says: /connection refused.*check/,
        args: () => ['--base-url', `http://127.0.0.1:${closedPort}`],
        env: () => creds,
      },
      {
        name: 'host name not found (.invalid)',
        code: 1,
        says: /host name not found.*check/,
        args: () => ['--base-url', 'https://uid2-batch-test.invalid'],
        env: () => creds,
      },
      {
        name: 'TLS to a plain http port',
        code: 1,
        says: /TLS.*check/,
        args: () => ['--base-url', serve.url.replace('http:', 'https:')],
        env: () => serveConnection(serve).env,
      },
      {
        name: "a proxy's 407",
        code: 1,
        says: /proxy.*407.*user:password/,
        args: () => ['--base-url', serve.url, '--proxy', proxyUrl],
        env: () => serveConnection(serve).env,
      },
      {
        name: 'a wrong client secret (the local service with another secret)',
        code: 4,
        says: /client secret does not match the API key/,
        args: () => ['--base-url', serve.url],
        env: () => ({ UID2_API_KEY: serve.apiKey, UID2_CLIENT_SECRET: ANY_SECRET }),
      },
    ];
  for (const c of cases) {
    it(`${c.name}: exit ${c.code}, the cause on stderr and in the summary, no output`, async () => {
      const r = await mapOnce(c.args(), c.env());
      expect(r.code, r.stderr).toBe(c.code);
      const lines = r.stderr.split('\n').filter((l) => l.startsWith('uid2-batch: ') && !l.includes('using columns'));
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(c.says);
      expect(r.summary).toMatchObject({ command: 'map', outcome: 'failed', exit_code: c.code });
      expect(String(r.summary.error)).toMatch(c.says);
      expect(existsSync(r.out)).toBe(false);
      // neither -o, --rejects nor a temp file of either
      expect(r.left.filter((f) => !f.endsWith('.json'))).toEqual([]);
    }, 60_000);
  }

  it('stops sending: a wrong secret costs one request, not one per batch', async () => {
    const before = (await serve.stats()).requests['/v3/identity/map'] ?? 0;
    const r = await mapOnce(['--base-url', serve.url], { UID2_API_KEY: serve.apiKey, UID2_CLIENT_SECRET: ANY_SECRET });
    expect(r.code).toBe(4);
    const sent = ((await serve.stats()).requests['/v3/identity/map'] ?? 0) - before;
    // 3,000 rows in batches of 100 would be 30 requests; one at a time, the first refusal stops the run
    expect(sent).toBeLessThanOrEqual(2);
  }, 60_000);
});

describe('nothing reachable: optout-check and remap-due stop the same way', () => {
  it('optout-check against a closed port: exit 1, no output', async () => {
    const input = dir.file('raw-uids.csv', 'raw_uid\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n');
    const out = join(dir.path, 'optout-out.csv');
    const r = await runCli(
      ['optout-check', input, '--base-url', `http://127.0.0.1:${closedPort}`, '--max-attempts', '2', '-o', out],
      { env: creds },
    );
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/connection refused.*check/);
    expect(existsSync(out)).toBe(false);
  }, 60_000);

  it('remap-due of a state whose service is gone: exit 1, no changes file', async () => {
    const other = await startServe();
    const state = join(dir.path, 'remap.db');
    try {
      const mapped = await runCli(
        ['map', SAMPLE, ...serveConnection(other).args, '--state', state, '-o', join(dir.path, 'remap-map.csv')],
        { env: serveConnection(other).env },
      );
      expect(mapped.code, mapped.stderr).toBe(0);
    } finally {
      await other.stop();
    }
    const changes = join(dir.path, 'remap-changes.csv');
    const r = await runCli(
      [
        'remap-due',
        '--state',
        state,
        ...serveConnection(other).args,
        '--now',
        '2100-01-01T00:00:00Z',
        '--max-attempts',
        '2',
        '-o',
        changes,
      ],
      { env: serveConnection(other).env },
    );
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/connection refused.*check/);
    expect(existsSync(changes)).toBe(false);
  }, 90_000);
});
