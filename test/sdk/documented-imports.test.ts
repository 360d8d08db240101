// The imports the docs show (docs/proxy.md, docs/library.md) are exports of the package, and work as shown.
import { describe, expect, it } from 'vitest';
import { createServiceClient, describeProxyRoute, resolveConfig, resolveProxy } from 'uid2-batch';

const SECRET = Buffer.alloc(32, 3).toString('base64');

describe("docs/proxy.md's example", () => {
  it('routes through the proxy of the environment given', async () => {
    const environ = { HTTPS_PROXY: 'http://user:pw@proxy.example.com:3128' };
    const client = createServiceClient({
      baseUrl: 'https://operator-integ.uidapi.com',
      apiKey: 'key',
      clientSecret: SECRET,
      proxy: resolveProxy(undefined, environ),
    });
    try {
      const route = describeProxyRoute(client.proxyRoute);
      expect(route).toContain('proxy.example.com:3128');
      expect(route).toContain('HTTPS_PROXY');
      expect(route).not.toContain('pw');
    } finally {
      await client.close();
    }
  });

  it('resolveConfig puts the same proxy in ResolvedConfig.proxy', () => {
    const environ = { HTTPS_PROXY: 'http://proxy.example.com:3128', UID2_API_KEY: 'key', UID2_CLIENT_SECRET: SECRET };
    const config = resolveConfig({ env: 'integ' }, environ, {
      homedir: () => '/nonexistent',
      readFile: () => {
        throw Object.assign(new Error('no file'), { code: 'ENOENT' });
      },
    });
    expect(config.proxy).toEqual(resolveProxy(undefined, environ));
  });
});
