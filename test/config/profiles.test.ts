import { describe, expect, it } from 'vitest';
import {
  ConfigError,
  defaultConfigPath,
  parseConfigFile,
  rejectSecretFlags,
  resolveConfig,
} from '../../src/config/index.js';
import { API_KEY_VALUE, SECRET_VALUE, fakeMachine } from './fake-fs.js';

const DEFAULT_PATH = '/home/ana/.config/uid2-batch/config.json';

function errorOf(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('config file location', () => {
  it('uses XDG_CONFIG_HOME when set, else ~/.config', () => {
    expect(defaultConfigPath({ XDG_CONFIG_HOME: '/xdg' }, '/home/ana')).toBe('/xdg/uid2-batch/config.json');
    expect(defaultConfigPath({}, '/home/ana')).toBe(DEFAULT_PATH);
    expect(defaultConfigPath({ XDG_CONFIG_HOME: 'relative' }, '/home/ana')).toBe(DEFAULT_PATH);
  });

  it('takes --config over UID2_CONFIG over the default', () => {
    const profile = (env: string) => JSON.stringify({ profiles: { p: { env } } });
    const m = fakeMachine({
      '/flag.json': profile('prod'),
      '/var.json': profile('prod-au'),
      [DEFAULT_PATH]: profile('euid-integ'),
    });
    const env = (flags: { config?: string }, environ: NodeJS.ProcessEnv) =>
      resolveConfig({ profile: 'p', ...flags }, environ, m.deps, { require: { apiKey: false, clientSecret: false } })
        .env.name;
    expect(env({ config: '/flag.json' }, { UID2_CONFIG: '/var.json' })).toBe('prod');
    expect(env({}, { UID2_CONFIG: '/var.json' })).toBe('prod-au');
    expect(env({}, {})).toBe('euid-integ');
  });

  it('requires a named config file to exist, not the default one', () => {
    const m = fakeMachine();
    expect(errorOf(() => resolveConfig({ config: '/missing.json', env: 'local' }, {}, m.deps)).message).toBe(
      'cannot read the config file /missing.json (from --config): no such file',
    );
    expect(resolveConfig({ env: 'local' }, {}, m.deps).configFile).toBeUndefined();
  });
});

describe('profiles', () => {
  it('uses UID2_PROFILE and reads relative secret files next to the config file', () => {
    const m = fakeMachine({
      '/etc/uid2/config.json': JSON.stringify({
        profiles: { prod: { env: 'prod', api_key_file: 'prod.key', client_secret_file: '~/prod.secret' } },
      }),
      '/etc/uid2/prod.key': `${API_KEY_VALUE}\n`,
      '/home/ana/prod.secret': `${SECRET_VALUE}\n`,
    });
    const cfg = resolveConfig({ config: '/etc/uid2/config.json' }, { UID2_PROFILE: 'prod' }, m.deps);
    expect(cfg).toMatchObject({
      profile: 'prod',
      env: { name: 'prod' },
      apiKey: API_KEY_VALUE,
      clientSecret: SECRET_VALUE,
      apiKeySource: 'profile',
    });
    expect(cfg.apiKeyOrigin).toBe("profile 'prod' in /etc/uid2/config.json (/etc/uid2/prod.key)");
  });

  it('lists the known profiles when the named one is missing', () => {
    const m = fakeMachine({ [DEFAULT_PATH]: JSON.stringify({ profiles: { integ: {}, prod: {} } }) });
    expect(errorOf(() => resolveConfig({ profile: 'staging' }, {}, m.deps)).message).toBe(
      `profile 'staging' (from --profile) is not in ${DEFAULT_PATH}: its profiles are integ, prod`,
    );
  });

  it('says where the config file should be when a profile is named and there is none', () => {
    const m = fakeMachine();
    expect(errorOf(() => resolveConfig({}, { UID2_PROFILE: 'prod' }, m.deps)).message).toContain(
      `no config file at ${DEFAULT_PATH}`,
    );
  });

  it('reports malformed JSON by position, never quoting the text', () => {
    const text = `{"profiles": {"prod": {"api_key": "${API_KEY_VALUE}" "client_secret": "${SECRET_VALUE}"}}}`;
    const err = errorOf(() => parseConfigFile(text, '/c.json'));
    expect(err.message).toMatch(/^cannot use the config file \/c\.json: it is not valid JSON/);
    expect(err.message).not.toContain(API_KEY_VALUE);
    expect(err.message).not.toContain(SECRET_VALUE);
    expect(err.message).not.toContain('UID2-C');
  });

  it('refuses unknown keys, wrong types and double definitions', () => {
    expect(errorOf(() => parseConfigFile('{"profiles": {"p": {"apikey": "x"}}}', '/c')).message).toContain(
      "unknown key 'apikey'",
    );
    expect(errorOf(() => parseConfigFile('{"profile": {}}', '/c')).message).toContain("unknown key 'profile'");
    expect(errorOf(() => parseConfigFile('{"profiles": {"p": {"env": 3}}}', '/c')).message).toContain(
      "'env' must be a non-empty string",
    );
    expect(errorOf(() => parseConfigFile('[]', '/c')).message).toContain('must be a JSON object');
    expect(
      errorOf(() => parseConfigFile('{"profiles": {"p": {"api_key": "a", "api_key_file": "b"}}}', '/c')).message,
    ).toContain('both api_key and api_key_file');
  });

  it('knows whether a file holds secrets inline', () => {
    expect(parseConfigFile('{"profiles": {"p": {"api_key_file": "k"}}}', '/c').holdsSecrets).toBe(false);
    expect(parseConfigFile(`{"profiles": {"p": {"client_secret": "${SECRET_VALUE}"}}}`, '/c').holdsSecrets).toBe(true);
  });
});

describe('permissions warning', () => {
  const withSecrets = JSON.stringify({
    profiles: { default: { env: 'prod', api_key: API_KEY_VALUE, client_secret: SECRET_VALUE } },
  });

  it('warns when a config file with secrets is readable by others', () => {
    const m = fakeMachine({ [DEFAULT_PATH]: { text: withSecrets, mode: 0o100644 } });
    resolveConfig({}, {}, m.deps);
    expect(m.warnings).toEqual([
      `the config file ${DEFAULT_PATH} holds secrets and is readable by other users (mode 644): run chmod 600 ${DEFAULT_PATH}`,
    ]);
    expect(m.warnings.join('\n')).not.toContain(SECRET_VALUE);
  });

  it('stays quiet for a private file, or one without secrets', () => {
    const privateFile = fakeMachine({ [DEFAULT_PATH]: { text: withSecrets, mode: 0o100600 } });
    resolveConfig({}, {}, privateFile.deps);
    expect(privateFile.warnings).toEqual([]);
    const noSecrets = fakeMachine({
      [DEFAULT_PATH]: { text: '{"profiles": {"default": {"env": "prod"}}}', mode: 0o100644 },
    });
    resolveConfig({}, { UID2_API_KEY: API_KEY_VALUE, UID2_CLIENT_SECRET: SECRET_VALUE }, noSecrets.deps);
    expect(noSecrets.warnings).toEqual([]);
  });

  it('warns about a shared secret file', () => {
    const m = fakeMachine({ '/s': { text: SECRET_VALUE, mode: 0o100640 } });
    resolveConfig({ clientSecretFile: '/s' }, { UID2_API_KEY: API_KEY_VALUE }, m.deps);
    expect(m.warnings).toHaveLength(1);
    expect(m.warnings[0]).toContain('chmod 600 /s');
  });
});

describe('secrets as flag values', () => {
  it('refuses --api-key and --client-secret, with or without =, naming what to use instead', () => {
    const e1 = errorOf(() => rejectSecretFlags(['map', 'in.csv', '--api-key', API_KEY_VALUE]));
    expect(e1.message).toContain('UID2_API_KEY');
    expect(e1.message).toContain('--api-key-file FILE');
    expect(e1.message).not.toContain(API_KEY_VALUE);
    const e2 = errorOf(() => rejectSecretFlags(['token', 'generate', `--client-secret=${SECRET_VALUE}`]));
    expect(e2.message).toContain('UID2_CLIENT_SECRET');
    expect(e2.message).toContain('--client-secret-file FILE');
    expect(e2.message).not.toContain(SECRET_VALUE);
  });

  it('refuses near misses of those flags (underscores, case, no hyphen) the same way, without the value', () => {
    for (const arg of [
      `--client_secret=${SECRET_VALUE}`,
      `--CLIENT-SECRET=${SECRET_VALUE}`,
      `--clientsecret=${SECRET_VALUE}`,
      `--api_key=${SECRET_VALUE}`,
      `--refresh_response_key=${SECRET_VALUE}`,
    ]) {
      const e = errorOf(() => rejectSecretFlags(['map', 'in.csv', arg]));
      expect(e.message).toContain(`${arg.split('=')[0]} is refused`);
      expect(e.message).toMatch(/UID2_CLIENT_SECRET|UID2_API_KEY|--refresh-response-key-file/);
      expect(e.message).not.toContain(SECRET_VALUE);
    }
    expect(() => rejectSecretFlags(['map', '--api_key_file', '/k'])).not.toThrow();
  });

  it('lets serve take its made-up key pair, and lets file flags and operands through', () => {
    expect(() => rejectSecretFlags(['serve', '--api-key', 'k', '--client-secret', SECRET_VALUE])).not.toThrow();
    expect(() => rejectSecretFlags(['--no-color', 'serve', '--api-key=k'])).not.toThrow();
    expect(() => rejectSecretFlags(['map', '--api-key-file', '/k', '--client-secret-file=/s'])).not.toThrow();
    expect(() => rejectSecretFlags(['map', '--', '--api-key'])).not.toThrow();
  });
});
