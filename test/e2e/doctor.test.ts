import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import { runCli, serveConnection, startServe, type ServeProcess } from '../helpers/map-e2e-processes.js';

interface Report {
  ok: boolean;
  exitCode: number;
  checks: { name: string; status: string; detail: string; fix?: string }[];
}

let serve: ServeProcess;
/** A service whose clock runs 10 minutes ahead of this machine's: --now at start skews its envelope clock. */
let skewed: ServeProcess;

beforeAll(async () => {
  ensureBuilt();
  [serve, skewed] = await Promise.all([
    startServe(),
    startServe(['--now', new Date(Date.now() + 10 * 60_000).toISOString()]),
  ]);
}, 120_000);

afterAll(async () => {
  await Promise.all([serve?.stop(), skewed?.stop()]);
});

async function doctor(target: ServeProcess, env: Record<string, string> = {}, args: string[] = ['--json']) {
  const conn = serveConnection(target);
  const r = await runCli(['doctor', ...args, ...conn.args], { env: { ...conn.env, ...env } });
  return { ...r, report: args.includes('--json') ? (JSON.parse(r.stdout) as Report) : undefined };
}

function check(report: Report | undefined, name: string) {
  const found = report?.checks.find((c) => c.name === name);
  expect(found, `no check named ${name}`).toBeDefined();
  return found!;
}

describe.concurrent('doctor against serve', () => {
  it('passes a good setup (exit 0) and never prints the key or the secret', async () => {
    const r = await doctor(serve, {}, []);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toMatch(/all checks passed \(0 failed/);
    for (const name of [
      'configuration',
      'credentials',
      'reachability',
      'API key',
      'client secret',
      'clock skew',
      'mapper role',
      'generator role',
      'opt-out status',
      'token refresh',
    ]) {
      expect(r.stdout).toMatch(new RegExp(`^ {2}pass {2}${name} `, 'm'));
    }
    expect(r.stdout).toContain('UID2_API_KEY');
    expect(r.stdout + r.stderr).not.toContain(serve.apiKey);
    expect(r.stdout + r.stderr).not.toContain(serve.clientSecret);
  });

  it('a wrong client secret: "client secret does not match the API key", exit 1', async () => {
    const r = await doctor(serve, { UID2_CLIENT_SECRET: randomBytes(32).toString('base64') });
    expect(r.code, r.stdout).toBe(1);
    const c = check(r.report, 'client secret');
    expect(c.status).toBe('fail');
    expect(c.detail).toMatch(/^the client secret does not match the API key/);
    expect(c.fix).toContain('issued together with this API key');
    expect(check(r.report, 'API key').status).toBe('pass');
  });

  it('a wrong API key: refused on every call, each role named, exit 4', async () => {
    const r = await doctor(serve, { UID2_API_KEY: 'UID2-C-L-999-notTheKey.abc=' });
    expect(r.code, r.stdout).toBe(4);
    expect(check(r.report, 'API key')).toMatchObject({ status: 'fail' });
    expect(check(r.report, 'API key').detail).toContain('refused the API key on every call');
    expect(check(r.report, 'mapper role').detail).toContain('lacks the MAPPER role or is wrong');
    expect(check(r.report, 'generator role').detail).toContain('lacks the GENERATOR role or is wrong');
  });

  it('a clock 10 minutes off: "clock skew" fails with the NTP fix, exit 1', async () => {
    const r = await doctor(skewed);
    expect(r.code, r.stdout).toBe(1);
    const c = check(r.report, 'clock skew');
    expect(c.status).toBe('fail');
    expect(c.detail).toContain('Invalid timestamp');
    expect(c.fix).toContain('NTP');
    expect(check(r.report, 'mapper role').status).toBe('skip');
  });

  it('simulated days are not skew: after POST /_local/clock {"advance_days": 30} every check passes', async () => {
    const moved = await startServe();
    try {
      const res = await fetch(`${moved.url}/_local/clock`, {
        method: 'POST',
        body: JSON.stringify({ advance_days: 30 }),
      });
      expect(res.status).toBe(200);
      const r = await doctor(moved);
      expect(r.code, r.stdout).toBe(0);
      expect(check(r.report, 'clock skew').status).toBe('pass');
      expect(check(r.report, 'token refresh').status).toBe('pass');
    } finally {
      await moved.stop();
    }
  });

  it('no service at the address: reachability fails, exit 1', async () => {
    // a port that was free a moment ago: bind-and-close is racy, so take the stopped-service route instead
    const gone = await startServe();
    const conn = serveConnection(gone);
    await gone.stop();
    const r = await runCli(['doctor', '--json', ...conn.args], { env: conn.env });
    expect(r.code, r.stdout).toBe(1);
    const report = JSON.parse(r.stdout) as Report;
    expect(check(report, 'reachability').status).toBe('fail');
    expect(check(report, 'reachability').fix).toContain('--base-url');
  });

  it('--env local checks the embedded service', async () => {
    const r = await runCli(['doctor', '--env', 'local', '--roles', 'generator']);
    expect(r.code, r.stdout).toBe(0);
    expect(r.stdout).toMatch(/pass {2}generator role/);
    expect(r.stdout).not.toMatch(/mapper role/);
  });
});
