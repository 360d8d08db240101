import { describe, expect, it } from 'vitest';
import { formatReport, parseRoles, runDoctor, type Check, type DoctorDeps } from '../../src/cli/doctor/doctor.js';
import { UserError } from '../../src/cli/shared/exit-codes.js';
import { ConfigError, resolveConfig, type ConnectionFlags } from '../../src/config/index.js';
import { NetworkError } from '../../src/client/index.js';
import { sha256Base64 } from '../../src/identity/index.js';
import { ClientError, ClockSkewError, UnauthorizedError } from '../../src/protocol/index.js';
import { CONFIG, fakeClient, identity, type Script } from './token-fakes.js';

const RAW_UID = `${'x'.repeat(43)}=`;
const NOW = 1_800_000_000_000;

function healthy(overrides: Script = {}): Script {
  return {
    mapV3: async () => ({ email: [], email_hash: [{ u: RAW_UID, p: null, r: 1 }], phone: [], phone_hash: [] }),
    generate: () => ({ status: 'success', identity: identity(NOW) }),
    validate: () => true,
    optoutStatus: async () => [],
    refresh: () => ({ status: 'success', identity: identity(NOW) }),
    lastServerTime: { serverMs: NOW, localMs: NOW + 1200 },
    ...overrides,
  };
}

function deps(script: Script, extra: Partial<DoctorDeps> = {}): DoctorDeps & { closed: () => number } {
  let closed = 0;
  return {
    resolve: () => CONFIG,
    open: async () => ({
      client: fakeClient(script),
      baseUrl: CONFIG.env.baseUrl,
      close: async () => {
        closed++;
      },
    }),
    healthcheck: async () => ({ ok: true, httpStatus: 200, ms: 3 }),
    closed: () => closed,
    ...extra,
  };
}

function byName(checks: Check[]): Record<string, Check> {
  return Object.fromEntries(checks.map((c) => [c.name, c]));
}

const refuse = (err: Error) => () => Promise.reject(err);
const unauthorized = () => new UnauthorizedError(401, 'unauthorized', undefined);
const wrongSecret = () =>
  new ClientError(
    400,
    'client_error',
    'Invalid body: Check encryption key (ClientSecret). See https://unifiedid.com/docs',
  );

describe('doctor', () => {
  it('passes a good setup: every check, exit 0, the connection closed, no secret printed', async () => {
    const d = deps(healthy());
    const report = await runDoctor({ roles: ['mapper', 'generator', 'optout'] }, d);
    expect(report.checks.map((c) => [c.name, c.status])).toEqual([
      ['configuration', 'pass'],
      ['credentials', 'pass'],
      ['reachability', 'pass'],
      ['API key', 'pass'],
      ['client secret', 'pass'],
      ['clock skew', 'pass'],
      ['mapper role', 'pass'],
      ['generator role', 'pass'],
      ['opt-out status', 'pass'],
      ['token refresh', 'pass'],
    ]);
    expect(report.exitCode).toBe(0);
    expect(d.closed()).toBe(1);
    const text = formatReport(report) + JSON.stringify(report);
    expect(text).not.toContain(CONFIG.apiKey!);
    expect(text).not.toContain(CONFIG.clientSecret!);
    expect(byName(report.checks).credentials!.detail).toContain('UID2_API_KEY');
    expect(byName(report.checks)['clock skew']!.detail).toContain('1.2 s ahead');
  });

  it('uses the validate test identity for map and generate, and the mapped raw UID for opt-out status', async () => {
    const script = healthy();
    let seen: unknown[] = [];
    const d = deps(script, {
      open: async () => {
        const client = fakeClient(script);
        seen = client.calls;
        return { client, baseUrl: 'x', close: async () => {} };
      },
    });
    await runDoctor({ roles: ['mapper', 'generator', 'optout'] }, d);
    const hash = sha256Base64('validate@example.com');
    expect(seen).toContainEqual({ method: 'mapV3', args: [{ email_hash: [hash] }] });
    expect(seen).toContainEqual({ method: 'tokenGenerate', args: [{ email_hash: hash }] });
    expect(seen).toContainEqual({ method: 'optoutStatus', args: [[RAW_UID]] });
  });

  it('a wrong key: "API key" fails, every role names itself, exit 4', async () => {
    const report = await runDoctor(
      { roles: ['mapper', 'generator', 'optout'] },
      deps(
        healthy({
          mapV3: refuse(unauthorized()),
          generate: refuse(unauthorized()),
          optoutStatus: refuse(unauthorized()),
          lastServerTime: undefined,
        }),
      ),
    );
    const c = byName(report.checks);
    expect(c['API key']!.status).toBe('fail');
    expect(c['API key']!.detail).toMatch(/refused the API key on every call/);
    expect(c['mapper role']!.detail).toContain('lacks the MAPPER role or is wrong');
    expect(c['generator role']!.detail).toContain('lacks the GENERATOR role or is wrong');
    expect(c['client secret']!.status).toBe('skip');
    expect(report.exitCode).toBe(4);
  });

  it('a key without one role: only that role fails, exit 4, and the fix says how to get it or skip it', async () => {
    const report = await runDoctor(
      { roles: ['mapper', 'generator', 'optout'] },
      deps(healthy({ mapV3: refuse(unauthorized()) })),
    );
    const c = byName(report.checks);
    expect(c['API key']!.status).toBe('pass');
    expect(c['mapper role']!.status).toBe('fail');
    expect(c['mapper role']!.fix).toContain('--roles');
    expect(c['generator role']!.status).toBe('pass');
    expect(report.exitCode).toBe(4);
    const only = await runDoctor({ roles: ['generator'] }, deps(healthy({ mapV3: refuse(unauthorized()) })));
    expect(only.exitCode).toBe(0);
    expect(only.checks.map((x) => x.name)).not.toContain('mapper role');
  });

  it('a wrong secret says the client secret does not match the API key, exit 1', async () => {
    const report = await runDoctor(
      { roles: ['mapper', 'generator', 'optout'] },
      deps(
        healthy({
          mapV3: refuse(wrongSecret()),
          generate: refuse(wrongSecret()),
          optoutStatus: refuse(wrongSecret()),
          lastServerTime: undefined,
        }),
      ),
    );
    const c = byName(report.checks);
    expect(c['client secret']!.status).toBe('fail');
    expect(c['client secret']!.detail).toMatch(/^the client secret does not match the API key/);
    expect(c['mapper role']!.status).toBe('skip');
    expect(c['API key']!.status).toBe('pass');
    expect(report.exitCode).toBe(1);
    expect(formatReport(report)).toMatch(
      /fail {2}client secret .*\n.*fix: use the client secret issued together with this API key/,
    );
  });

  it('names clock skew when the service rejects the request time, and tells to fix NTP', async () => {
    const skew = () =>
      new ClockSkewError(400, 'client_error', 'Invalid timestamp: Request too old or client time drift.');
    const report = await runDoctor(
      { roles: ['mapper', 'generator', 'optout'] },
      deps(
        healthy({
          mapV3: refuse(skew()),
          generate: refuse(skew()),
          optoutStatus: refuse(skew()),
          lastServerTime: undefined,
        }),
      ),
    );
    const c = byName(report.checks)['clock skew']!;
    expect(c.status).toBe('fail');
    expect(c.detail).toContain('Invalid timestamp');
    expect(c.fix).toContain('NTP');
    expect(byName(report.checks)['client secret']!.status).toBe('pass');
    expect(report.exitCode).toBe(1);
  });

  it.each([
    [10_000, 'pass'],
    [-45_000, 'warn'],
    [75_000, 'fail'],
  ] as const)('measured skew %i ms is %s', async (skewMs, status) => {
    const report = await runDoctor(
      { roles: ['mapper'] },
      deps(healthy({ lastServerTime: { serverMs: NOW, localMs: NOW + skewMs } })),
    );
    expect(byName(report.checks)['clock skew']!.status).toBe(status);
    expect(report.exitCode).toBe(status === 'fail' ? 1 : 0);
  });

  it('an unreachable service fails reachability and skips the rest', async () => {
    const report = await runDoctor(
      { roles: ['mapper'] },
      deps(healthy(), { healthcheck: async () => ({ ok: false, message: 'connect ECONNREFUSED 127.0.0.1:9' }) }),
    );
    const c = byName(report.checks);
    expect(c.reachability!.status).toBe('fail');
    expect(c.reachability!.detail).toContain('ECONNREFUSED');
    expect(c['mapper role']!.status).toBe('skip');
    expect(report.exitCode).toBe(1);
  });

  it('a network failure on a call fails that check', async () => {
    const report = await runDoctor(
      { roles: ['mapper'] },
      deps(healthy({ mapV3: refuse(new NetworkError('http://x/v3/identity/map', 'reset', 'ECONNRESET')) })),
    );
    expect(byName(report.checks)['mapper role']!.status).toBe('fail');
  });

  it('a configuration error fails the first check and skips the rest', async () => {
    const report = await runDoctor(
      { roles: ['mapper'] },
      deps(healthy(), {
        resolve: () => {
          throw new ConfigError('--env nope is not an environment');
        },
      }),
    );
    expect(report.checks[0]).toMatchObject({ name: 'configuration', status: 'fail' });
    expect(report.checks.slice(1).every((c) => c.status === 'skip')).toBe(true);
  });

  it('missing credentials are named with where to set them', async () => {
    const report = await runDoctor(
      { roles: ['mapper'] },
      deps(healthy(), { resolve: () => ({ ...CONFIG, clientSecret: undefined, clientSecretSource: 'none' }) }),
    );
    const c = byName(report.checks).credentials!;
    expect(c.status).toBe('fail');
    expect(c.detail).toContain('client secret: not set');
    expect(c.fix).toContain('UID2_CLIENT_SECRET');
  });

  it('parseRoles takes a comma list and refuses unknown roles', () => {
    expect(parseRoles('generator, mapper')).toEqual(['generator', 'mapper']);
    expect(() => parseRoles('admin')).toThrow(UserError);
  });
});

describe('doctor: where the base URL came from', () => {
  const noFile = {
    readFile: () => {
      throw Object.assign(new Error('no config file'), { code: 'ENOENT' });
    },
  };
  const KEYS = { UID2_API_KEY: 'key', UID2_CLIENT_SECRET: 'c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI=' };

  async function configurationLine(flags: ConnectionFlags, environ: NodeJS.ProcessEnv): Promise<string> {
    const d = deps(healthy(), { resolve: () => resolveConfig(flags, { ...KEYS, ...environ }, noFile) });
    const report = await runDoctor({ roles: [] }, d);
    const check = byName(report.checks).configuration;
    expect(check?.status).toBe('pass');
    return check?.detail ?? '';
  }

  it.each([
    [{ baseUrl: 'https://operator.example.com' }, {}, 'https://operator.example.com (from --base-url)'],
    [{}, { UID2_BASE_URL: 'https://operator.example.com' }, 'https://operator.example.com (from UID2_BASE_URL)'],
    [{ env: 'prod' }, {}, 'https://global.prod.uidapi.com (the default of environment prod)'],
    [{}, {}, 'https://operator-integ.uidapi.com (the default of environment integ)'],
  ] as [ConnectionFlags, NodeJS.ProcessEnv, string][])('%j %j: %s', async (flags, environ, expected) => {
    expect(await configurationLine(flags, environ)).toContain(expected);
  });

  it("a profile's base_url is named as the profile's", async () => {
    const file = JSON.stringify({ profiles: { po: { base_url: 'https://po.example.com' } } });
    const d = deps(healthy(), {
      resolve: () =>
        resolveConfig({ profile: 'po', config: '/cfg.json' }, KEYS, {
          readFile: () => file,
        }),
    });
    const report = await runDoctor({ roles: [] }, d);
    expect(byName(report.checks).configuration?.detail).toContain(
      "https://po.example.com (from base_url of profile 'po')",
    );
  });
});
