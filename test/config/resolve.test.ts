import { describe, expect, it } from 'vitest';
import {
  ConfigError,
  ENVIRONMENTS,
  attachLocalService,
  credentialsForDisplay,
  envFingerprint,
  environmentNames,
  resolveConfig,
  type ConnectionFlags,
} from '../../src/config/index.js';
import { API_KEY_VALUE, OTHER_SECRET, SECRET_VALUE, fakeMachine } from './fake-fs.js';

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

function resolve(flags: ConnectionFlags, environ: NodeJS.ProcessEnv, files: Parameters<typeof fakeMachine>[0] = {}) {
  const m = fakeMachine(files);
  return { cfg: resolveConfig(flags, environ, m.deps), warnings: m.warnings };
}

describe('environments', () => {
  it('lists the public environments with their scopes', () => {
    expect(environmentNames()).toEqual([
      'local',
      'integ',
      'prod',
      'prod-use',
      'prod-usw',
      'prod-au',
      'prod-jp',
      'prod-sg',
      'euid-integ',
      'euid-prod',
    ]);
    expect(ENVIRONMENTS.integ.baseUrl).toBe('https://operator-integ.uidapi.com');
    expect(ENVIRONMENTS.prod.baseUrl).toBe('https://global.prod.uidapi.com');
    expect(ENVIRONMENTS['prod-use'].baseUrl).toBe('https://prod.uidapi.com');
    expect(ENVIRONMENTS['prod-usw'].baseUrl).toBe('https://usw.prod.uidapi.com');
    expect(ENVIRONMENTS['prod-au'].baseUrl).toBe('https://au.prod.uidapi.com');
    expect(ENVIRONMENTS['prod-jp'].baseUrl).toBe('https://jp.prod.uidapi.com');
    expect(ENVIRONMENTS['prod-sg'].baseUrl).toBe('https://sg.prod.uidapi.com');
    expect(ENVIRONMENTS['euid-integ']).toMatchObject({
      baseUrl: 'https://integ.euid.eu',
      scope: 'EUID',
      isPublic: true,
    });
    expect(ENVIRONMENTS['euid-prod']).toMatchObject({ baseUrl: 'https://prod.euid.eu', scope: 'EUID', isPublic: true });
    expect(ENVIRONMENTS.local).toMatchObject({ scope: 'UID2', isPublic: false });
  });

  it('defaults to integ when nothing names an environment', () => {
    const { cfg } = resolve({}, CREDS);
    expect(cfg.env.name).toBe('integ');
    expect(cfg.envSource).toBe('default');
  });

  it('takes --env over UID2_ENV over the profile', () => {
    const files = {
      '/home/ana/.config/uid2-batch/config.json': JSON.stringify({ profiles: { default: { env: 'prod-jp' } } }),
    };
    expect(resolve({}, CREDS, files).cfg.env.name).toBe('prod-jp');
    expect(resolve({}, CREDS, files).cfg.envSource).toBe('profile');
    expect(resolve({}, { ...CREDS, UID2_ENV: 'euid-prod' }, files).cfg.env).toMatchObject({
      name: 'euid-prod',
      scope: 'EUID',
    });
    expect(resolve({ env: 'prod-au' }, { ...CREDS, UID2_ENV: 'euid-prod' }, files).cfg).toMatchObject({
      env: { name: 'prod-au' },
      envSource: 'flag',
    });
  });

  it('names the valid environments when given an unknown one', () => {
    const err = configError(() => resolve({ env: 'production' }, CREDS));
    expect(err.message).toContain("unknown environment 'production' (from --env)");
    for (const name of environmentNames()) expect(err.message).toContain(name);
    expect(configError(() => resolve({}, { ...CREDS, UID2_ENV: 'intgr' })).message).toContain('(from UID2_ENV)');
  });
});

describe('base URL', () => {
  it('overrides the environment URL and keeps its scope', () => {
    const { cfg } = resolve({ env: 'euid-integ', baseUrl: 'https://operator.example.com/' }, CREDS);
    expect(cfg.env).toMatchObject({ name: 'euid-integ', baseUrl: 'https://operator.example.com', scope: 'EUID' });
  });

  it('takes --scope for an unknown base URL', () => {
    const { cfg } = resolve({ baseUrl: 'https://operator.example.com', scope: 'euid' }, CREDS);
    expect(cfg.env.scope).toBe('EUID');
  });

  it('refuses a --scope that contradicts a named environment', () => {
    expect(configError(() => resolve({ env: 'prod', scope: 'EUID' }, CREDS)).message).toContain(
      'does not match environment prod',
    );
  });

  it('recognises the URL of a known environment', () => {
    const { cfg } = resolve({ baseUrl: 'https://prod.euid.eu' }, CREDS);
    expect(cfg.env).toMatchObject({ name: 'euid-prod', scope: 'EUID' });
  });

  it('refuses plain http to another machine unless --insecure-http', () => {
    const err = configError(() => resolve({ baseUrl: 'http://operator.internal:8080' }, CREDS));
    expect(err.message).toContain('plain http://');
    expect(err.message).toContain('--insecure-http');
    const { cfg } = resolve({ baseUrl: 'http://operator.internal:8080', insecureHttp: true }, CREDS);
    expect(cfg.env.baseUrl).toBe('http://operator.internal:8080');
  });

  it('allows plain http to this machine', () => {
    for (const url of ['http://127.0.0.1:8080', 'http://localhost:9', 'http://[::1]:3000']) {
      const { cfg } = resolve({ baseUrl: url }, CREDS);
      expect(cfg.env.baseUrl).toBe(url);
      expect(cfg.env.isPublic).toBe(false);
    }
  });

  it('refuses URLs with a version path, credentials, a query or another scheme', () => {
    expect(configError(() => resolve({ baseUrl: 'https://integ.euid.eu/v2' }, CREDS)).message).toContain(
      'use https://integ.euid.eu',
    );
    const withPassword = configError(() => resolve({ baseUrl: 'https://user:hunter2@operator.example.com' }, CREDS));
    expect(withPassword.message).not.toContain('hunter2');
    expect(configError(() => resolve({ baseUrl: 'https://operator.example.com?x=1' }, CREDS)).message).toContain(
      'query',
    );
    expect(configError(() => resolve({ baseUrl: 'ftp://operator.example.com' }, CREDS)).message).toContain('https://');
    expect(configError(() => resolve({ baseUrl: 'operator.example.com' }, CREDS)).message).toContain('is not a URL');
  });

  it('takes UID2_BASE_URL, and a profile URL only for the profile environment', () => {
    const files = {
      '/home/ana/.config/uid2-batch/config.json': JSON.stringify({
        profiles: { po: { env: 'integ', base_url: 'https://po.example.com' } },
      }),
    };
    expect(resolve({}, { ...CREDS, UID2_BASE_URL: 'https://env.example.com' }).cfg.env.baseUrl).toBe(
      'https://env.example.com',
    );
    expect(resolve({ profile: 'po' }, CREDS, files).cfg.env.baseUrl).toBe('https://po.example.com');
    expect(resolve({ profile: 'po', env: 'prod' }, CREDS, files).cfg.env.baseUrl).toBe(
      'https://global.prod.uidapi.com',
    );
  });
});

describe('credentials', () => {
  it('reads UID2_API_KEY and UID2_CLIENT_SECRET', () => {
    const { cfg } = resolve({}, CREDS);
    expect(cfg).toMatchObject({
      apiKey: API_KEY_VALUE,
      clientSecret: SECRET_VALUE,
      apiKeySource: 'env',
      clientSecretSource: 'env',
    });
  });

  it('prefers the file flags over variables, variables over _FILE variables... and over profiles', () => {
    const files = {
      '/secrets/key': `${API_KEY_VALUE}-flag\n`,
      '/secrets/secret': `${OTHER_SECRET}\r\n`,
      '/secrets/env-key': 'key-from-env-file\n',
      '/home/ana/.config/uid2-batch/config.json': JSON.stringify({
        profiles: { default: { api_key: 'key-from-profile', client_secret: SECRET_VALUE } },
      }),
    };
    const byFlag = resolve({ apiKeyFile: '/secrets/key', clientSecretFile: '/secrets/secret' }, CREDS, files).cfg;
    expect(byFlag).toMatchObject({
      apiKey: `${API_KEY_VALUE}-flag`,
      clientSecret: OTHER_SECRET,
      apiKeySource: 'file',
      apiKeyOrigin: '--api-key-file /secrets/key',
    });
    const byEnvFile = resolve({}, { UID2_API_KEY_FILE: '/secrets/env-key' }, files).cfg;
    expect(byEnvFile).toMatchObject({
      apiKey: 'key-from-env-file',
      apiKeySource: 'file',
      clientSecretSource: 'profile',
    });
    const byProfile = resolve({}, {}, files).cfg;
    expect(byProfile).toMatchObject({ apiKey: 'key-from-profile', apiKeySource: 'profile', profile: 'default' });
  });

  it('refuses both a variable and its _FILE twin', () => {
    const err = configError(() => resolve({}, { ...CREDS, UID2_API_KEY_FILE: '/x' }));
    expect(err.message).toBe('both UID2_API_KEY and UID2_API_KEY_FILE are set: unset one of them');
  });

  it('says which variable or file flag to set when a credential is missing', () => {
    const noKey = configError(() => resolve({ env: 'prod' }, { UID2_CLIENT_SECRET: SECRET_VALUE }));
    expect(noKey.message).toBe(
      'no API key for prod: set UID2_API_KEY, or pass --api-key-file FILE, or name a profile with --profile',
    );
    expect(noKey.message).not.toContain(SECRET_VALUE);
    const noSecret = configError(() => resolve({ env: 'euid-prod' }, { UID2_API_KEY: API_KEY_VALUE }));
    expect(noSecret.message).toContain('set UID2_CLIENT_SECRET, or pass --client-secret-file FILE');
    expect(noSecret.message).not.toContain(API_KEY_VALUE);
    expect(noSecret.message.split('. ')).toHaveLength(1);
  });

  it('points at --env local when the default environment lacks credentials', () => {
    const err = configError(() => resolve({}, {}));
    expect(err.message).toContain('integ, the default environment');
    expect(err.message).toContain('--env local');
  });

  it('says a client secret is malformed without showing it', () => {
    const bad = SECRET_VALUE.slice(0, 40);
    const err = configError(() => resolve({}, { UID2_API_KEY: API_KEY_VALUE, UID2_CLIENT_SECRET: bad }));
    expect(err.message).toContain('the client secret from UID2_CLIENT_SECRET is malformed');
    expect(err.message).toContain('base64 of 32 bytes');
    expect(err.message).not.toContain(bad);
    const notBase64 = 'this is not base64 at all, it has spaces!!!!';
    expect(
      configError(() => resolve({}, { UID2_API_KEY: API_KEY_VALUE, UID2_CLIENT_SECRET: notBase64 })).message,
    ).not.toContain(notBase64);
    const sixteenBytes = Buffer.alloc(16, 1).toString('base64');
    expect(
      configError(() => resolve({}, { UID2_API_KEY: API_KEY_VALUE, UID2_CLIENT_SECRET: sixteenBytes })).message,
    ).toContain('malformed');
  });

  it('refuses an API key with spaces or line breaks inside, without showing it', () => {
    const key = 'UID2-C-L-999-abc def';
    const err = configError(() => resolve({}, { UID2_API_KEY: key, UID2_CLIENT_SECRET: SECRET_VALUE }));
    expect(err.message).toContain('spaces, tabs or line breaks');
    expect(err.message).not.toContain(key);
  });

  it('trims trailing newlines of secret files and refuses empty or missing ones', () => {
    const files = { '/k': `${API_KEY_VALUE}\n\n`, '/s': `${SECRET_VALUE}\n`, '/empty': '\n' };
    expect(resolve({ apiKeyFile: '/k', clientSecretFile: '/s' }, {}, files).cfg).toMatchObject({
      apiKey: API_KEY_VALUE,
      clientSecret: SECRET_VALUE,
    });
    expect(configError(() => resolve({ apiKeyFile: '/empty' }, CREDS, files)).message).toBe(
      'the API key file /empty (from --api-key-file) is empty',
    );
    expect(configError(() => resolve({ clientSecretFile: '/nope' }, CREDS, files)).message).toBe(
      'cannot read the client secret file /nope (from --client-secret-file): no such file',
    );
  });

  it('needs no credentials for --env local and ignores those of the shell', () => {
    const { cfg } = resolve({ env: 'local' }, CREDS);
    expect(cfg).toMatchObject({ isLocal: true, apiKeySource: 'local-service', clientSecretSource: 'local-service' });
    expect(cfg.apiKey).toBeUndefined();
    expect(cfg.clientSecret).toBeUndefined();
  });

  it('needs credentials for a local environment reached through --base-url', () => {
    expect(configError(() => resolve({ env: 'local', baseUrl: 'http://127.0.0.1:4000' }, {})).message).toContain(
      'no API key for local',
    );
    const { cfg } = resolve({ env: 'local', baseUrl: 'http://127.0.0.1:4000' }, CREDS);
    expect(cfg.isLocal).toBe(false);
  });

  it('lets a command need no credentials', () => {
    const m = fakeMachine();
    const cfg = resolveConfig({ env: 'prod' }, {}, m.deps, { require: { apiKey: false, clientSecret: false } });
    expect(cfg).toMatchObject({ apiKeySource: 'none', clientSecretSource: 'none' });
  });

  it('passes timeouts and attempts through', () => {
    expect(resolve({ timeoutMs: 5000, maxAttempts: 3 }, CREDS).cfg).toMatchObject({ timeoutMs: 5000, maxAttempts: 3 });
  });
});

describe('display and fingerprint', () => {
  it('shows where credentials came from, never their values', () => {
    const files = { '/k': API_KEY_VALUE };
    const { cfg } = resolve({ apiKeyFile: '/k', env: 'prod-usw' }, { UID2_CLIENT_SECRET: SECRET_VALUE }, files);
    const shown = credentialsForDisplay(cfg);
    expect(shown).toMatchObject({
      env: 'prod-usw',
      baseUrl: 'https://usw.prod.uidapi.com',
      apiKey: '--api-key-file /k',
      clientSecret: 'UID2_CLIENT_SECRET',
    });
    const text = JSON.stringify(shown);
    expect(text).not.toContain(API_KEY_VALUE);
    expect(text).not.toContain(SECRET_VALUE);
  });

  it('fingerprints by scope and family of raw UIDs', () => {
    const fp = (flags: ConnectionFlags) => envFingerprint(resolve(flags, CREDS).cfg);
    expect(fp({ env: 'prod' })).toBe('UID2:prod');
    expect(fp({ env: 'prod-sg' })).toBe(fp({ env: 'prod' }));
    expect(fp({ env: 'integ' })).toBe('UID2:integ');
    expect(fp({ env: 'euid-prod' })).toBe('EUID:prod');
    expect(fp({ env: 'euid-integ' })).not.toBe(fp({ env: 'integ' }));
    expect(fp({ env: 'local' })).toBe('UID2:local');
    expect(fp({ baseUrl: 'http://127.0.0.1:4567' })).toBe(fp({ baseUrl: 'http://127.0.0.1:9999' }));
    expect(fp({ baseUrl: 'https://po.example.com' })).toBe('UID2:https://po.example.com');
  });

  it('attaches the embedded service to a local config', () => {
    const { cfg } = resolve({ env: 'local' }, {});
    const attached = attachLocalService(cfg, {
      url: 'http://127.0.0.1:5555/',
      apiKey: 'k',
      clientSecret: SECRET_VALUE,
    });
    expect(attached).toMatchObject({
      isLocal: true,
      env: { baseUrl: 'http://127.0.0.1:5555' },
      apiKey: 'k',
      clientSecretSource: 'local-service',
    });
    expect(envFingerprint(attached)).toBe(envFingerprint(cfg));
    expect(credentialsForDisplay(attached).apiKey).toBe('the embedded local service');
  });
});
