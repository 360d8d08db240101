// The built CLI through a real proxy process on loopback: --proxy and HTTP_PROXY reach every request, NO_PROXY
// bypasses it, and doctor names the proxy in use.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import { runCli, serveConnection, startServe, type ServeProcess } from '../helpers/map-e2e-processes.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';

let serve: ServeProcess;
let proxy: ProxyProcess;

beforeAll(async () => {
  ensureBuilt();
  serve = await startServe();
  proxy = await startProxyProcess();
});

afterAll(async () => {
  await proxy?.stop();
  await serve?.stop();
});

const ROWS = 'id,email\n1,a@example.com\n2,b@example.com\n';

describe('CLI through a proxy', () => {
  it('map --proxy sends its requests through the proxy', async () => {
    const before = proxy.log.length;
    const { args, env } = serveConnection(serve);
    const r = await runCli(['map', '-', '-q', '--proxy', proxy.url, ...args], { input: ROWS, env });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/,mapped,/);
    await proxy.flush();
    const seen = proxy.log.slice(before);
    expect(seen.some((e) => e.method === 'POST' && e.target.endsWith('/v3/identity/map'))).toBe(true);
  });

  it('NO_PROXY bypasses --proxy', async () => {
    const before = proxy.log.length;
    const { args, env } = serveConnection(serve);
    const r = await runCli(['map', '-', '-q', '--proxy', proxy.url, ...args], {
      input: ROWS,
      env: { ...env, NO_PROXY: '127.0.0.1' },
    });
    expect(r.code, r.stderr).toBe(0);
    await proxy.flush();
    expect(proxy.log.slice(before)).toEqual([]);
  });

  it('doctor reports the proxy in use', async () => {
    const { args, env } = serveConnection(serve);
    const r = await runCli(['doctor', '--proxy', proxy.url, ...args], { env });
    expect(`${r.stdout}${r.stderr}`).toMatch(/proxy.*127\.0\.0\.1/);
  });
});
