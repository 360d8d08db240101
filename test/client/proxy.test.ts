import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  createServiceClient,
  describeProxyRoute,
  NetworkError,
  NO_PROXY_SETTINGS,
  noProxyMatch,
  proxyRouteFor,
  type ClientOptions,
  type ServiceClient,
} from '../../src/client/index.js';
import { resolveProxy } from '../../src/config/index.js';
import { startService, type LocalService } from '../../src/service/index.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';

/** A name only the test proxy resolves (to 127.0.0.1): a request for it can only succeed through the proxy. */
const PROXY_ONLY_HOST = 'uid2-service.test';
const EMAIL = 'proxy-user@example.com';

/** The settings the CLI gives the client for these proxy variables, without --proxy. */
const fromEnv = (environ: NodeJS.ProcessEnv) => resolveProxy(undefined, environ);
/** The settings for --proxy URL, with these variables set. */
const fromFlag = (url: string, environ: NodeJS.ProcessEnv = {}) => resolveProxy(url, environ);

describe('proxy routes', () => {
  it('https targets fall back to HTTP_PROXY; http targets never take HTTPS_PROXY', () => {
    const onlyHttp = fromEnv({ HTTP_PROXY: 'http://p.example:8080' });
    expect(proxyRouteFor('https://operator-integ.uidapi.com', onlyHttp)).toMatchObject({
      kind: 'proxy',
      proxy: { from: 'HTTP_PROXY' },
    });
    const onlyHttps = fromEnv({ HTTPS_PROXY: 'http://p.example:8080' });
    expect(proxyRouteFor('http://svc.example:8080', onlyHttps)).toEqual({
      kind: 'direct',
      why: 'no proxy set for http:// targets',
    });
  });

  it('a proxy from the environment is never used for loopback; --proxy is, unless NO_PROXY names the host', () => {
    const env = fromEnv({ HTTP_PROXY: 'http://p.example:8080' });
    for (const target of ['http://127.0.0.1:9', 'http://localhost:9', 'http://[::1]:9']) {
      const route = proxyRouteFor(target, env);
      expect(route.kind, target).toBe('direct');
      expect(describeProxyRoute(route)).toMatch(/is this machine \(HTTP_PROXY is not used for loopback/);
    }
    expect(proxyRouteFor('http://127.0.0.1:9', fromFlag('http://p.example:8080')).kind).toBe('proxy');
    const exempt = proxyRouteFor(
      'http://127.0.0.1:9',
      fromFlag('http://p.example:8080', { no_proxy: 'localhost,127.0.0.1' }),
    );
    expect(describeProxyRoute(exempt)).toBe('none: no_proxy entry "127.0.0.1" matches 127.0.0.1');
    expect(proxyRouteFor('https://x.example', fromFlag('none'))).toEqual({
      kind: 'direct',
      why: 'proxy turned off by --proxy none',
    });
  });

  it('NO_PROXY entries: exact host, domain suffix with or without a leading dot or *., port, *, IPv6', () => {
    expect(noProxyMatch('uidapi.com', 'operator-integ.uidapi.com', 443)).toBe('uidapi.com');
    expect(noProxyMatch('.uidapi.com', 'operator-integ.uidapi.com', 443)).toBe('.uidapi.com');
    expect(noProxyMatch('*.uidapi.com', 'uidapi.com', 443)).toBe('*.uidapi.com');
    expect(noProxyMatch('uidapi.com', 'notuidapi.com', 443)).toBeUndefined();
    expect(noProxyMatch('a.example:8443', 'a.example', 443)).toBeUndefined();
    expect(noProxyMatch('a.example:8443', 'a.example', 8443)).toBe('a.example:8443');
    expect(noProxyMatch('x.example *', 'anything.example', 80)).toBe('*');
    expect(noProxyMatch('::1, [fe80::1]:8080', '[::1]', 80)).toBe('::1');
    expect(noProxyMatch('[fe80::1]:8080', '[fe80::1]', 8080)).toBe('[fe80::1]:8080');
    expect(noProxyMatch(' , ', 'a.example', 80)).toBeUndefined();
  });

  it('describes the proxy with user and password hidden', () => {
    const text = describeProxyRoute(
      proxyRouteFor('https://prod.uidapi.com', fromFlag('http://alice:pa%40ss@proxy.corp:3128')),
    );
    expect(text).toBe('http://***@proxy.corp:3128 (from --proxy)');
    expect(text).not.toContain('alice');
  });

  it('without settings the client goes direct, and says so', () => {
    expect(describeProxyRoute(proxyRouteFor('https://prod.uidapi.com', NO_PROXY_SETTINGS))).toBe('none: no proxy set');
  });
});

describe('requests through a real proxy process', () => {
  let service: LocalService;
  let proxy: ProxyProcess;
  let authProxy: ProxyProcess;
  /** Logs CONNECT requests and never answers them. */
  let silentProxy: ProxyProcess;
  const clients: ServiceClient[] = [];

  beforeAll(async () => {
    [service, proxy, authProxy, silentProxy] = await Promise.all([
      startService(),
      startProxyProcess(['--host', `${PROXY_ONLY_HOST}=127.0.0.1`]),
      startProxyProcess(['--auth', 'alice:s3cret-pw', '--host', `${PROXY_ONLY_HOST}=127.0.0.1`]),
      startProxyProcess(['--hang-connect', 'yes']),
    ]);
  });
  afterAll(async () => {
    await Promise.all([proxy?.stop(), authProxy?.stop(), silentProxy?.stop(), service?.close()]);
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close()));
  });

  function client(options: Partial<ClientOptions>): ServiceClient {
    const c = createServiceClient({
      baseUrl: service.url,
      apiKey: service.apiKey,
      clientSecret: service.clientSecret,
      sleep: async () => {},
      ...options,
    });
    clients.push(c);
    return c;
  }

  /** The log entries added while `work` ran. */
  async function seenBy<T>(p: ProxyProcess, work: () => Promise<T>): Promise<{ result: T; entries: typeof p.log }> {
    await p.flush();
    const before = p.log.length;
    const result = await work();
    await p.flush();
    return { result, entries: p.log.slice(before) };
  }

  const serviceOnProxyOnlyHost = (): string => service.url.replace('127.0.0.1', PROXY_ONLY_HOST);

  it('--proxy carries every call to the loopback service, forwarded as plain http', async () => {
    const c = client({ proxy: fromFlag(proxy.url) });
    expect(describeProxyRoute(c.proxyRoute)).toBe(`${proxy.url} (from --proxy)`);
    const { result, entries } = await seenBy(proxy, async () => {
      const first = await c.mapV3({ email: [EMAIL] });
      const second = await c.mapV3({ email: [EMAIL] });
      return [first, second];
    });
    expect(result[0]!.email[0]).toHaveProperty('u');
    expect(result[1]).toEqual(result[0]);
    expect(entries).toEqual([
      { kind: 'forward', method: 'POST', target: `${service.url}/v3/identity/map`, auth: 'none' },
      { kind: 'forward', method: 'POST', target: `${service.url}/v3/identity/map`, auth: 'none' },
    ]);
  });

  it('HTTP_PROXY: a host only the proxy can resolve is reached, and the health check takes the same way', async () => {
    const c = client({ baseUrl: serviceOnProxyOnlyHost(), proxy: fromEnv({ HTTP_PROXY: proxy.url }) });
    expect(c.proxyRoute).toMatchObject({ kind: 'proxy', proxy: { from: 'HTTP_PROXY' } });
    const { result, entries } = await seenBy(
      proxy,
      async () => [await c.tokenGenerate({ email: EMAIL }), await c.healthcheck()] as const,
    );
    expect(result[0].status).toBe('success');
    expect(result[1]).toEqual({ statusCode: 200 });
    expect(entries.map((e) => `${e.method} ${e.target}`)).toEqual([
      `POST ${serviceOnProxyOnlyHost()}/v2/token/generate`,
      `GET ${serviceOnProxyOnlyHost()}/ops/healthcheck`,
    ]);
  });

  it('NO_PROXY bypasses the proxy: the proxy sees nothing', async () => {
    // --proxy with the service named in NO_PROXY: straight to 127.0.0.1, and it works
    const direct = client({ proxy: fromFlag(proxy.url, { NO_PROXY: 'example.com, 127.0.0.1' }) });
    const { result, entries } = await seenBy(proxy, () => direct.mapV3({ email: [EMAIL] }));
    expect(result.email[0]).toHaveProperty('u');
    expect(entries).toEqual([]);

    // HTTP_PROXY with NO_PROXY naming the proxy-only host: the client looks the name up itself, which fails
    const bypass = client({
      baseUrl: serviceOnProxyOnlyHost(),
      maxAttempts: 1,
      proxy: fromEnv({ HTTP_PROXY: proxy.url, no_proxy: '.test' }),
    });
    const failed = await seenBy(proxy, () =>
      bypass.mapV3({ email: [EMAIL] }).then(
        () => undefined,
        (err: unknown) => err,
      ),
    );
    expect(failed.result).toBeInstanceOf(NetworkError);
    expect((failed.result as NetworkError).failure).toBe('dns');
    expect(failed.entries).toEqual([]);
  });

  it('a proxy from the environment is not used for the loopback service (as with --env local)', async () => {
    const c = client({ proxy: fromEnv({ HTTP_PROXY: proxy.url, HTTPS_PROXY: proxy.url }) });
    const { result, entries } = await seenBy(proxy, () => c.mapV3({ email: [EMAIL] }));
    expect(result.email[0]).toHaveProperty('u');
    expect(entries).toEqual([]);
  });

  it('proxy credentials in the URL are sent as Proxy-Authorization; refused ones fail once, with the password hidden', async () => {
    const withAuth = (password: string) => `http://alice:${password}@127.0.0.1:${authProxy.port}`;
    const good = client({ proxy: fromFlag(withAuth('s3cret-pw')) });
    const ok = await seenBy(authProxy, () => good.mapV3({ email: [EMAIL] }));
    expect(ok.result.email[0]).toHaveProperty('u');
    expect(ok.entries.map((e) => e.auth)).toEqual(['ok']);

    const bad = client({ proxy: fromFlag(withAuth('wrong-pw')) });
    const refused = await seenBy(authProxy, () =>
      bad.mapV3({ email: [EMAIL] }).then(
        () => undefined,
        (err: unknown) => err,
      ),
    );
    const err = refused.result as NetworkError;
    expect(err).toBeInstanceOf(NetworkError);
    expect(err.failure).toBe('proxy-auth');
    expect(err.message).toContain(`through the proxy http://***@127.0.0.1:${authProxy.port} (from --proxy)`);
    expect(err.message).toMatch(
      /proxy authentication required.*\(HTTP 407\); put the right user:password in the proxy URL of --proxy/,
    );
    expect(err.message).not.toMatch(/wrong-pw|alice/);
    // not worth a retry: the same credentials would be refused again
    expect(refused.entries.map((e) => e.auth)).toEqual(['bad']);
    expect(bad.stats.requests).toBe(1);
  });

  it('a proxy nobody listens on: a refused connection naming the proxy and its setting, for http and https services', async () => {
    // the port of a proxy process that has stopped: nothing listens there any more
    const gone = await startProxyProcess();
    await gone.stop();
    for (const baseUrl of [service.url, `https://${PROXY_ONLY_HOST}`]) {
      const c = client({ baseUrl, maxAttempts: 1, proxy: fromFlag(gone.url) });
      const err = await c.mapV3({ email: [EMAIL] }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err, baseUrl).toBeInstanceOf(NetworkError);
      expect((err as NetworkError).failure).toBe('refused');
      expect((err as NetworkError).message).toBe(
        `connection refused talking to the identity service at ${baseUrl}/v3/identity/map through the proxy ${gone.url} (from --proxy) (ECONNREFUSED)`,
      );
    }
  });

  it('a proxy that never answers the CONNECT: the request timeout holds, and the error names the proxy', async () => {
    const c = client({
      baseUrl: `https://${PROXY_ONLY_HOST}`,
      maxAttempts: 1,
      requestTimeoutMs: 300,
      proxy: fromEnv({ https_proxy: silentProxy.url }),
    });
    const { result, entries } = await seenBy(silentProxy, () =>
      c.mapV3({ email: [EMAIL] }).then(
        () => undefined,
        (e: unknown) => e,
      ),
    );
    expect(result).toBeInstanceOf(NetworkError);
    expect((result as NetworkError).failure).toBe('timeout');
    expect((result as NetworkError).message).toContain(`through the proxy ${silentProxy.url} (from https_proxy)`);
    expect(entries.map((e) => e.kind)).toEqual(['connect']);
  });

  it('https targets go through a CONNECT tunnel; a tunnel the proxy cannot open is a NetworkError naming the proxy', async () => {
    // nothing listens on port 9 of 127.0.0.1, so the proxy answers the CONNECT with 502
    const c = client({
      baseUrl: `https://${PROXY_ONLY_HOST}:9`,
      maxAttempts: 2,
      proxy: fromEnv({ HTTPS_PROXY: proxy.url }),
    });
    const { result, entries } = await seenBy(proxy, () =>
      c.mapV3({ email: [EMAIL] }).then(
        () => undefined,
        (err: unknown) => err,
      ),
    );
    const err = result as NetworkError;
    expect(err).toBeInstanceOf(NetworkError);
    expect(err.failure).toBe('proxy');
    expect(err.message).toBe(
      `the proxy refused to forward the request talking to the identity service at https://${PROXY_ONLY_HOST}:9/v3/identity/map through the proxy ${proxy.url} (from HTTPS_PROXY) (HTTP 502)`,
    );
    // a gateway error may pass: retried like any network failure
    expect(entries).toEqual([
      { kind: 'connect', method: 'CONNECT', target: `${PROXY_ONLY_HOST}:9`, auth: 'none' },
      { kind: 'connect', method: 'CONNECT', target: `${PROXY_ONLY_HOST}:9`, auth: 'none' },
    ]);
  });
});
