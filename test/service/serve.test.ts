import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exposureWarning, runServe, serveOptions } from '../../src/cli/serve/serve.js';
import { UserError } from '../../src/cli/shared/exit-codes.js';
import { startService, type LocalService } from '../../src/service/index.js';
import { BIN, ROOT, ensureBuilt } from '../helpers/map-e2e-build.js';
import { admin, body, call, get } from './helpers.js';

interface Ready {
  url: string;
  api_key: string;
  client_secret: string;
}

/** A handle on a service in another process, enough for the test client; `envelopeNowMs` is the caller's clock. */
function remote(
  ready: Ready,
  envelopeNowMs: () => number = Date.now,
): Pick<LocalService, 'url' | 'apiKey' | 'clientSecret' | 'envelopeNowMs'> {
  return { url: ready.url, apiKey: ready.api_key, clientSecret: ready.client_secret, envelopeNowMs };
}

describe('serve flags', () => {
  it('maps every flag onto the service options', () => {
    const options = serveOptions({
      host: '127.0.0.1',
      port: 0,
      apiKey: 'UID2-C-L-1-abc',
      clientSecret: Buffer.alloc(32, 1).toString('base64'),
      seed: 's',
      now: '2026-03-01T12:00:00',
      scope: 'euid',
      optoutFile: 'o.csv',
      fault429: 0.1,
      fault500: 0.2,
      faultDrop: 0.3,
      latencyMs: 5,
      rateLimit: 1000,
      identityLifetime: 7200,
      refreshFrom: 600,
      refreshLifetime: 90_000,
    });
    expect(options).toEqual({
      host: '127.0.0.1',
      port: 0,
      apiKey: 'UID2-C-L-1-abc',
      clientSecret: Buffer.alloc(32, 1).toString('base64'),
      seed: 's',
      nowMs: Date.UTC(2026, 2, 1, 12),
      scope: 'EUID',
      optoutFile: 'o.csv',
      faults: { p429: 0.1, p500: 0.2, pDrop: 0.3, latencyMs: 5, rateLimitItemsPerS: 1000 },
      lifetimes: { identityExpiresS: 7200, refreshFromS: 600, refreshExpiresS: 90_000 },
    });
    expect(serveOptions({ now: '1767225600' }).nowMs).toBe(Date.UTC(2026, 0, 1));
    expect(serveOptions({ now: '2026-01-01T01:00:00+01:00' }).nowMs).toBe(Date.UTC(2026, 0, 1));
  });

  it('refuses bad values with one clear message', () => {
    expect(() => serveOptions({ now: 'tomorrow' })).toThrow(UserError);
    expect(() => serveOptions({ now: '1767225600000' })).toThrow(/--now/);
    expect(() => serveOptions({ scope: 'uid3' })).toThrow(/--scope must be uid2 or euid/);
    expect(() => serveOptions({ fault429: 0.5, fault500: 0.4, faultDrop: 0.2 })).toThrow(/must not exceed 1/);
  });

  it('warns when the address is reachable from other machines', () => {
    expect(exposureWarning(undefined)).toBeNull();
    expect(exposureWarning('127.0.0.1')).toBeNull();
    expect(exposureWarning('::1')).toBeNull();
    expect(exposureWarning('localhost')).toBeNull();
    expect(exposureWarning('0.0.0.0')).toMatch(/warning: listening on 0\.0\.0\.0, not loopback/);
  });
});

describe('runServe in process', () => {
  it('prints exactly one JSON line, serves until the stop signal, then closes', async () => {
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    let stop!: () => void;
    const stopSignal = new Promise<void>((r) => (stop = r));
    const running = runServe(
      { port: 0, now: '2026-02-02T00:00:00Z', apiKey: 'UID2-L-L-fixed' },
      { stdout, stderr, stopSignal },
    );
    const [line] = (await once(stdout, 'data')) as [Buffer];
    const text = line.toString();
    expect(text.endsWith('\n')).toBe(true);
    expect(text.trim().split('\n')).toHaveLength(1);
    const ready = JSON.parse(text) as Ready;
    expect(Object.keys(ready)).toEqual(['url', 'api_key', 'client_secret']);
    expect(ready.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(ready.api_key).toBe('UID2-L-L-fixed');
    expect(Buffer.from(ready.client_secret, 'base64')).toHaveLength(32);
    expect((await get({ url: ready.url }, '/ops/healthcheck')).text).toBe('OK');
    stop();
    await running;
    await expect(get({ url: ready.url }, '/ops/healthcheck')).rejects.toThrow();
    expect(stderr.read()).toBeNull();
  });

  it('turns setup problems into user errors', async () => {
    const io = { stdout: new PassThrough(), stderr: new PassThrough(), stopSignal: new Promise(() => undefined) };
    await expect(runServe({ clientSecret: 'short' }, io)).rejects.toThrow(UserError);
    await expect(runServe({ optoutFile: '/nonexistent/optouts.csv' }, io)).rejects.toThrow(
      /cannot read the opt-out file/,
    );
    const taken = await startService();
    try {
      await expect(runServe({ port: taken.port }, io)).rejects.toThrow(
        /the port is in use; pick another --port, or 0 for a free one/,
      );
    } finally {
      await taken.close();
    }
  });
});

describe('uid2-batch serve (process)', () => {
  const children: ChildProcess[] = [];
  beforeAll(() => ensureBuilt());
  afterAll(() => {
    for (const child of children)
      if (child.exitCode === null && child.pid !== undefined) process.kill(child.pid, 'SIGKILL');
  });

  async function spawnServe(args: string[]): Promise<{ child: ChildProcess; ready: Ready; stderr: () => string }> {
    const child = spawn(process.execPath, [BIN, 'serve', '--port', '0', ...args], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    let err = '';
    child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    let out = '';
    while (!out.includes('\n')) {
      const [chunk] = (await Promise.race([
        once(child.stdout!, 'data'),
        once(child, 'exit').then(() => [Buffer.from(`exited: ${err}\n`)]),
      ])) as [Buffer];
      out += chunk.toString();
    }
    return { child, ready: JSON.parse(out.slice(0, out.indexOf('\n'))) as Ready, stderr: () => err };
  }

  it.each(['SIGTERM', 'SIGINT'] as const)('serves the API and stops cleanly on %s (exit 0)', async (signal) => {
    const { child, ready, stderr } = await spawnServe(['--seed', 'serve-test']);
    const mapped = await body<{ email: { u: string }[] }>(remote(ready), '/v3/identity/map', {
      email: ['serve@example.com'],
    });
    expect(mapped.email[0]!.u).toMatch(/^[A-Za-z0-9+/]{43}=$/);
    process.kill(child.pid!, signal);
    const [code] = (await once(child, 'exit')) as [number | null];
    expect(code).toBe(0);
    expect(stderr()).toBe('');
  });

  it('--now sets identity time and skews the envelope clock by as much; /_local/clock moves identity time only', async () => {
    const startedAt = Date.now();
    const { child, ready } = await spawnServe(['--now', '2026-04-01T00:00:00Z', '--seed', 'serve-test']);
    const readNow = async () => (await admin(remote(ready), '/_local/clock')).json.now_ms as number;
    expect(Math.abs((await readNow()) - Date.UTC(2026, 3, 1))).toBeLessThan(60_000);
    const skew = Date.UTC(2026, 3, 1) - startedAt;
    const skewed = remote(ready, () => Date.now() + skew);
    const email = { email: ['serve@example.com'] };
    expect((await call(skewed, '/v3/identity/map', email)).status).toBe(200);
    expect((await call(remote(ready), '/v3/identity/map', email)).json).toEqual({
      status: 'client_error',
      message: 'Invalid timestamp: Request too old or client time drift.',
    });
    await admin(remote(ready), '/_local/clock', { advance_days: 30 });
    expect(Math.abs((await readNow()) - Date.UTC(2026, 4, 1))).toBeLessThan(60_000);
    // the envelope clock stayed where --now put it
    expect((await call(skewed, '/v3/identity/map', email)).status).toBe(200);
    process.kill(child.pid!, 'SIGTERM');
    await once(child, 'exit');
  });

  it('exits 2 with one line for a bad flag', async () => {
    const child = spawn(process.execPath, [BIN, 'serve', '--fault-500', '7'], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    let err = '';
    child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    const [code] = (await once(child, 'exit')) as [number | null];
    expect(code).toBe(2);
    expect(err.trim().split('\n')).toHaveLength(1);
    expect(err).toMatch(/--fault-500/);
  });
});
