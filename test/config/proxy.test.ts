import { describe, expect, it } from 'vitest';
import {
  ConfigError,
  parseProxyUrl,
  resolveConfig,
  resolveProxy,
  type ConnectionFlags,
} from '../../src/config/index.js';
import { API_KEY_VALUE, SECRET_VALUE, fakeMachine } from './fake-fs.js';

const CREDS = { UID2_API_KEY: API_KEY_VALUE, UID2_CLIENT_SECRET: SECRET_VALUE };

function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('proxy setting: --proxy over the environment', () => {
  it('reads the lowercase variable before the uppercase one, skips blank ones, and takes a bare host:port as http://', () => {
    const s = resolveProxy(undefined, {
      HTTPS_PROXY: 'http://upper:1',
      https_proxy: 'lower.example:3128',
      NO_PROXY: 'a.example',
      http_proxy: ' ',
    });
    expect(s).toEqual({
      mode: 'env',
      https: { url: 'http://lower.example:3128/', from: 'https_proxy' },
      noProxy: { value: 'a.example', from: 'NO_PROXY' },
    });
    expect(resolveProxy(undefined, {})).toEqual({ mode: 'env' });
  });

  it('--proxy wins over the variables for every service, keeping NO_PROXY; --proxy none turns proxies off', () => {
    const environ = { HTTPS_PROXY: 'http://env-proxy:1', no_proxy: 'localhost' };
    const address = { url: 'http://flag-proxy:8080/', from: '--proxy' };
    expect(resolveProxy('flag-proxy:8080', environ)).toEqual({
      mode: 'flag',
      http: address,
      https: address,
      noProxy: { value: 'localhost', from: 'no_proxy' },
    });
    expect(resolveProxy('NONE', environ)).toEqual({ mode: 'off', offBy: '--proxy none' });
  });

  it('resolveConfig carries the choice to ResolvedConfig.proxy, for --env local too', () => {
    const m = fakeMachine({});
    const integ = resolveConfig({ env: 'integ' }, { ...CREDS, HTTPS_PROXY: 'https://proxy.corp:8443' }, m.deps);
    expect(integ.proxy).toEqual({ mode: 'env', https: { url: 'https://proxy.corp:8443/', from: 'HTTPS_PROXY' } });
    const local = resolveConfig({ env: 'local', proxy: 'http://127.0.0.1:8888' } as ConnectionFlags, {}, m.deps);
    expect(local.proxy?.mode).toBe('flag');
  });

  it('a malformed proxy is a ConfigError naming the setting, never the password', () => {
    const cases: [() => unknown, RegExp][] = [
      [
        () => resolveProxy(undefined, { HTTPS_PROXY: 'socks5://u:pw-123@h:1' }),
        /^HTTPS_PROXY must be an http:\/\/ or https:\/\/ proxy, got socks5:/,
      ],
      [
        () => resolveProxy('http://u:pw-123@h:1/path', {}),
        /^--proxy must be only scheme, host and port.*: http:\/\/\*\*\*@h:1 has a path/,
      ],
      [() => parseProxyUrl('http://u:pw-123@', 'http_proxy'), /^http_proxy is not a proxy URL: "http:\/\/\*\*\*@"/],
      [
        () => resolveConfig({ env: 'integ' }, { ...CREDS, HTTP_PROXY: 'http://u:pw-123@[bad' }, fakeMachine({}).deps),
        /^HTTP_PROXY is not a proxy URL/,
      ],
    ];
    for (const [fn, message] of cases) {
      const err = configError(fn);
      expect(err.message).toMatch(message);
      expect(err.message).not.toContain('pw-123');
    }
  });
});
