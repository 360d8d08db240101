import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NO_PROXY_SETTINGS } from '../../src/client/index.js';
import { resolveProxy } from '../../src/config/index.js';
import { Transport } from '../../src/client/transport.js';

// The client loads only the parts of undici it uses: the package's index would also load fetch, WebSocket, the
// mocks and the caches on every start of the CLI. Each test file runs in a process of its own, so what the module
// cache holds here is what the transport loaded.
const loaded = () => Object.keys(createRequire(import.meta.url).cache).filter((path) => path.includes('undici'));

describe('the parts of undici the transport loads', () => {
  let server: Server;
  let url: string;
  beforeAll(async () => {
    server = createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(`${req.method} ${req.url}`);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/base`;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const transport = (proxy = NO_PROXY_SETTINGS) =>
    new Transport({ baseUrl: url, connections: 2, connectTimeoutMs: 5_000, requestTimeoutMs: 5_000, proxy });

  it('sends a request over its pool, with the request API attached', async () => {
    const t = transport();
    try {
      const answer = await t.post('/v2/ping', { body: 'x', headers: {} });
      expect(answer.statusCode).toBe(200);
      expect(answer.body.toString()).toBe('POST /base/v2/ping');
    } finally {
      await t.close();
    }
  });

  it('has loaded neither the package index nor its fetch, WebSocket or mocks', async () => {
    // a direct pool, and a proxy agent (--proxy is used even for a loopback service)
    const direct = transport();
    const proxied = transport(resolveProxy('http://127.0.0.1:9', {}));
    expect(proxied.route.kind).toBe('proxy');
    await Promise.all([direct.close(), proxied.close()]);
    const paths = loaded();
    expect(paths.some((path) => /undici[\\/]lib[\\/]dispatcher[\\/]proxy-agent\.js$/.test(path))).toBe(true);
    expect(paths.some((path) => /undici[\\/]lib[\\/]dispatcher[\\/]pool\.js$/.test(path))).toBe(true);
    expect(paths.filter((path) => /undici[\\/](index\.js|lib[\\/](web|mock|cache)[\\/])/.test(path))).toEqual([]);
  });
});
