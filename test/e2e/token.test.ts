import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Base64 } from '../../src/identity/index.js';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import { runCli, serveConnection, startServe, type ServeProcess } from '../helpers/map-e2e-processes.js';

/** The built CLI against `serve` in its own process, credentials only through UID2_API_KEY / UID2_CLIENT_SECRET. */

interface Identity {
  advertising_token: string;
  refresh_token: string;
  identity_expires: number;
  refresh_from: number;
  refresh_expires: number;
  refresh_response_key: string;
}

let serve: ServeProcess;
let dir: string;

beforeAll(async () => {
  ensureBuilt();
  serve = await startServe();
  dir = mkdtempSync(join(tmpdir(), 'uid2-token-e2e-'));
}, 120_000);

afterAll(async () => {
  await serve?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Runs `uid2-batch token ...` against the serve process; `key: false` leaves the API key and secret out. */
function token(args: string[], options: { input?: string; key?: boolean; target?: ServeProcess } = {}) {
  const target = options.target ?? serve;
  const conn = serveConnection(target);
  return runCli(['token', ...args, ...conn.args], { input: options.input, env: options.key === false ? {} : conn.env });
}

function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

async function generate(args: string[], out?: string): Promise<Identity> {
  const r = await token(['generate', ...args, ...(out ? ['--out', out] : [])]);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as Identity;
}

describe.concurrent('token generate', () => {
  it.each([
    ['--email', 'Someone.Else@Example.com', 'A4'],
    ['--phone', '+441234567890', 'B4'],
    ['--email-hash', sha256Base64('hash.user@example.com'), 'A4'],
    ['--phone-hash', sha256Base64('+15551234567'), 'B4'],
  ])('%s gives a token identity that validates against the same identifier', async (flag, value, prefix) => {
    const r = await token(['generate', flag, value]);
    expect(r.code, r.stderr).toBe(0);
    const id = JSON.parse(r.stdout) as Identity;
    expect(Object.keys(id)).toEqual([
      'advertising_token',
      'refresh_token',
      'identity_expires',
      'refresh_from',
      'refresh_expires',
      'refresh_response_key',
    ]);
    expect(id.advertising_token.startsWith(prefix)).toBe(true);
    expect(id.refresh_token).toHaveLength(388);
    expect(id.refresh_from).toBeLessThanOrEqual(id.identity_expires);
    expect(id.identity_expires).toBeLessThanOrEqual(id.refresh_expires);
    expect(id.refresh_from).toBeGreaterThan(Date.now() - 60_000);
    const v = await token(['validate', '--token', id.advertising_token, flag, value]);
    expect(v.stdout).toBe('true\n');
    expect(v.code, v.stderr).toBe(0);
  });

  it('takes `--email -` from stdin, so the address is not in argv', async () => {
    const r = await token(['generate', '--email', '-'], { input: 'stdin.user@example.com\n' });
    expect(r.code, r.stderr).toBe(0);
    const id = JSON.parse(r.stdout) as Identity;
    const v = await token([
      'validate',
      '--token',
      id.advertising_token,
      '--email-hash',
      sha256Base64('stdin.user@example.com'),
    ]);
    expect(v.stdout).toBe('true\n');
  });

  it('refuses an invalid identifier locally: one line, exit 2, value not echoed', async () => {
    const r = await token(['generate', '--phone', '(555) 867-5309']);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toContain('E.164');
    expect(r.stderr).not.toContain('867');
    expect(r.stdout).toBe('');
  });

  it.each([
    ['--email', 'optout@example.com'],
    ['--phone-hash', sha256Base64('+00000000000')],
  ])(
    'the always-optout identity %s %s prints {"status":"optout"} and exits 5, as refresh does',
    async (flag, value) => {
      const out = join(dir, `optout-${flag}.json`);
      const r = await token(['generate', flag, value, '--out', out]);
      expect(r.code, r.stderr).toBe(5);
      expect(JSON.parse(r.stdout)).toEqual({ status: 'optout' });
      expect(r.stderr).toContain('opted out');
      expect(() => statSync(out)).toThrow();
    },
  );

  it('writes --out 0600 and a batch file with one identity per row', async () => {
    const out = join(dir, 'single.json');
    await generate(['--email', 'file.user@example.com'], out);
    expect(statSync(out).mode & 0o777).toBe(0o600);

    const input = file(
      'audience.csv',
      'identifier,identifier_type\na1@example.com,email\n+12025550123,phone\noptout@example.com,email\nnot-an-email,email\n',
    );
    const output = join(dir, 'audience-out.csv');
    const r = await token(['generate', '--input', input, '-o', output, '--concurrency', '2']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/token generate: 4 rows .*2 success, 1 optout, 1 invalid, 0 error/);
    expect(statSync(output).mode & 0o777).toBe(0o600);
    const rows = parse(readFileSync(output, 'utf8'), { columns: true }) as Record<string, string>[];
    expect(rows.map((x) => x.status)).toEqual(['success', 'success', 'optout', 'invalid']);
    expect(rows[0]!.refresh_token).toHaveLength(388);
    expect(rows[1]!.advertising_token.startsWith('B4')).toBe(true);
    expect(rows[3]!.reason).toBe('invalid email');
  });
});

describe.concurrent('token refresh', () => {
  it('a chain of 3 refreshes with --update, each answer decrypted with the newest key; an older key fails clearly', async () => {
    const path = join(dir, 'chain.json');
    const first = await generate(['--email', 'chain.user@example.com'], path);
    const chain: Identity[] = [first];
    for (let i = 0; i < 3; i++) {
      const r = await token(['refresh', '--in', path, '--update'], { key: false });
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toContain('warning: refresh_from');
      const next = JSON.parse(readFileSync(path, 'utf8')) as Identity;
      expect(JSON.parse(r.stdout)).toEqual(next);
      expect(statSync(path).mode & 0o777).toBe(0o600);
      chain.push(next);
    }
    expect(new Set(chain.map((c) => c.refresh_token)).size).toBe(4);
    expect(new Set(chain.map((c) => c.refresh_response_key)).size).toBe(4);
    // each new token still names the same person
    const v = await token(['validate', '--token', chain[3]!.advertising_token, '--email', 'chain.user@example.com']);
    expect(v.stdout).toBe('true\n');

    const newest = chain[3]!;
    const older = chain[1]!;
    const r = await token(
      [
        'refresh',
        '--refresh-token-file',
        file('rt', newest.refresh_token),
        '--refresh-response-key-file',
        file('rk', older.refresh_response_key),
      ],
      { key: false },
    );
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(
      /does not decrypt with the refresh_response_key given: that key does not belong to this refresh_token/,
    );
    expect(r.stderr).not.toContain(older.refresh_response_key);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    // six runs of the CLI in one test: a loaded machine needs more than the default 30 s
  }, 60_000);

  it('reads the identity from stdin; takes --refresh-token with a warning; refuses the refresh_response_key as a flag value', async () => {
    const id = await generate(['--email', 'stdin.refresh@example.com']);
    const piped = await token(['refresh'], { input: JSON.stringify(id), key: false });
    expect(piped.code, piped.stderr).toBe(0);
    const next = JSON.parse(piped.stdout) as Identity;
    const keyFile = join(dir, 'stdin-refresh.key');
    writeFileSync(keyFile, `${next.refresh_response_key}\n`, { mode: 0o600 });
    const argv = await token(
      ['refresh', '--refresh-token', next.refresh_token, '--refresh-response-key-file', keyFile],
      { key: false },
    );
    expect(argv.code, argv.stderr).toBe(0);
    expect(argv.stderr).toContain('`ps` and shell history');
    const refused = await token(
      ['refresh', '--refresh-token', next.refresh_token, '--refresh-response-key', next.refresh_response_key],
      { key: false },
    );
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/--refresh-response-key is refused.*--refresh-response-key-file FILE/);
    expect(refused.stderr).not.toContain(next.refresh_response_key);
  });

  it.each([
    ['--email', 'refresh-optout@example.com'],
    ['--phone', '+00000000002'],
  ])('the refresh-optout identity %s %s gets a token, and its refresh answers optout (exit 5)', async (flag, value) => {
    const path = join(dir, `refresh-optout-${flag}.json`);
    await generate([flag, value], path);
    const r = await token(['refresh', '--in', path, '--update'], { key: false });
    expect(r.code, r.stderr).toBe(5);
    expect(JSON.parse(r.stdout)).toEqual({ status: 'optout' });
    expect(r.stderr).toMatch(/optout: the user has opted out/);
  });

  describe('refused refresh tokens, with and without an API key', () => {
    let id: Identity;
    beforeAll(async () => {
      id = await generate(['--email', 'refused.user@example.com']);
    });

    it('an invalid refresh token: invalid_token (exit 6) with a key, error (exit 8) without', async () => {
      // the service takes any length but 388 as a legacy token it never issued
      const truncated = id.refresh_token.slice(0, 200);
      const args = [
        'refresh',
        '--refresh-token-file',
        file('short', truncated),
        '--refresh-response-key-file',
        file('key', id.refresh_response_key),
      ];
      const withKey = await token(args);
      expect(withKey.code, withKey.stderr).toBe(6);
      expect(withKey.stderr).toMatch(/invalid_token: .*Invalid Token presented.*200 characters/);
      const withoutKey = await token(args, { key: false });
      expect(withoutKey.code, withoutKey.stderr).toBe(8);
      expect(withoutKey.stderr).toMatch(/error: .*Error refreshing token.*invalid or expired.*UID2_API_KEY/);
    });

    it('a damaged 388-character token cannot be read either way (exit 6)', async () => {
      const t = id.refresh_token;
      const damaged = t.slice(0, 100) + (t[100] === 'A' ? 'B' : 'A') + t.slice(101);
      const args = [
        'refresh',
        '--refresh-token-file',
        file('damaged', damaged),
        '--refresh-response-key-file',
        file('key2', id.refresh_response_key),
      ];
      for (const key of [true, false]) {
        const r = await token(args, { key });
        expect(r.code, r.stderr).toBe(6);
        expect(r.stderr).toMatch(/invalid refresh token: the service cannot read it/);
      }
    });
  });

  // sequential: the second test counts the refreshes this service has seen. Its own service: moving identity
  // time 2 days would expire the other tests' tokens.
  describe.sequential('expired refresh tokens (a service whose identity time is moved 2 days on)', () => {
    let later: ServeProcess;
    let path: string;
    beforeAll(async () => {
      later = await startServe();
      path = join(dir, 'expiring.json');
      const r = await token(['generate', '--email', 'expiring.user@example.com', '--out', path], { target: later });
      expect(r.code, r.stderr).toBe(0);
      const moved = await fetch(`${later.url}/_local/clock`, {
        method: 'POST',
        body: JSON.stringify({ advance_days: 2 }),
      });
      expect(moved.status).toBe(200);
    }, 60_000);
    afterAll(async () => {
      await later?.stop();
    });

    it('expired_token (exit 7) with a key, error (exit 8) without; the file is left as it was', async () => {
      const before = readFileSync(path, 'utf8');
      const withKey = await token(['refresh', '--in', path, '--update'], { target: later });
      expect(withKey.code, withKey.stderr).toBe(7);
      expect(withKey.stderr).toMatch(/expired_token: .*Expired Token presented/);
      const withoutKey = await token(['refresh', '--in', path], { target: later, key: false });
      expect(withoutKey.code, withoutKey.stderr).toBe(8);
      expect(readFileSync(path, 'utf8')).toBe(before);
    });

    it("enveloped requests from this machine's clock still get in, answered at the moved identity time", async () => {
      const r = await token(['generate', '--email', 'after.the.move@example.com'], { target: later });
      expect(r.code, r.stderr).toBe(0);
      const id = JSON.parse(r.stdout) as Identity;
      // generated 2 days ahead of this machine: identity_expires = identity now + 1 h
      expect(id.identity_expires - Date.now()).toBeGreaterThan(2 * 86_400_000);
      expect(id.identity_expires - Date.now()).toBeLessThan(2 * 86_400_000 + 2 * 3_600_000);
    });

    it("past refresh_expires on this machine's clock it is refused before sending, unless --force", async () => {
      const id = JSON.parse(readFileSync(path, 'utf8')) as Identity;
      const stale = file('stale.json', JSON.stringify({ ...id, refresh_expires: Date.now() - 60_000 }));
      const refreshes = async () => (await later.stats()).requests['/v2/token/refresh'];
      const requestsBefore = await refreshes();
      const refused = await token(['refresh', '--in', stale], { target: later });
      expect(refused.code, refused.stderr).toBe(7);
      expect(refused.stderr).toMatch(/expired: .*--force/);
      expect(await refreshes()).toBe(requestsBefore);
      const forced = await token(['refresh', '--in', stale, '--force'], { target: later });
      expect(forced.code, forced.stderr).toBe(7);
      expect(forced.stderr).toMatch(/expired_token/);
    });
  });
});

describe('token validate', () => {
  let id: Identity;
  beforeAll(async () => {
    id = await generate(['--email', 'validate@example.com']);
  });

  it('false for another identifier or an unnormalized hash: exit 1 and the formatting hint', async () => {
    const other = await token(['validate', '--token', id.advertising_token, '--email', 'someone.else@example.com']);
    expect(other.code, other.stderr).toBe(1);
    expect(other.stdout).toBe('false\n');
    expect(other.stderr).toMatch(/input formatting/);
    // the classic mistake: hashing the address as typed
    const raw = await token([
      'validate',
      '--token',
      id.advertising_token,
      '--email-hash',
      sha256Base64('Validate@Example.com'),
    ]);
    expect(raw.stdout).toBe('false\n');
    expect(raw.stderr).toContain(sha256Base64('Validate@Example.com'));
    const normalized = await token(['validate', '--token', id.advertising_token, '--email', 'Validate@Example.com']);
    expect(normalized.stdout).toBe('true\n');
  });

  it('a token the service cannot read is not false: exit 6, nothing on stdout', async () => {
    const r = await token(['validate', '--token', 'garbage', '--email', 'validate@example.com']);
    expect(r.code, r.stderr).toBe(6);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^uid2-batch: the service cannot read this advertising token/);
  });

  it('the Token Validator CSV: every row with valid, the hash used and a reason', async () => {
    const phone = await generate(['--phone', '+12345678901']);
    const input = file(
      'validator.csv',
      'identifier,identifier_type,token\n' +
        `VALIDATE@example.com,email,${id.advertising_token}\n` +
        `+12345678901,phone,${phone.advertising_token}\n` +
        `someone@example.com,email,${id.advertising_token}\n` +
        `12345678901,phone,${phone.advertising_token}\n` +
        `${sha256Base64('validate@example.com')},email_hash,${id.advertising_token}\n` +
        'validate@example.com,email,not-a-token\n',
    );
    const output = join(dir, 'validator-out.csv');
    const r = await token(['validate', '--input', input, '-o', output]);
    // rows no re-run can fix are data (invalid), not a reason to run again (3)
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/token validate: 6 rows .*3 true, 1 false, 2 invalid, 0 error/);
    const rows = parse(readFileSync(output, 'utf8'), { columns: true }) as Record<string, string>[];
    expect(rows.map((x) => x.valid)).toEqual(['true', 'true', 'false', 'invalid', 'true', 'invalid']);
    expect(rows[0]!.hash).toBe(sha256Base64('validate@example.com'));
    expect(rows[2]!.hash).toBe(sha256Base64('someone@example.com'));
    expect(rows[3]!.hash).toBe('');
    expect(rows[3]!.reason).toContain('E.164');
    expect(rows[5]!.reason).toBe('the service cannot read this token (Invalid token)');
  });
});

describe('token test-identities', () => {
  it('lists the six §6 identities with their hashes and the docs note', async () => {
    const r = await runCli(['token', 'test-identities', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const { identities, note } = JSON.parse(r.stdout) as {
      identities: { identifier: string; hash: string; outcome: string }[];
      note: string;
    };
    expect(identities.map((i) => [i.identifier, i.outcome])).toEqual([
      ['optout@example.com', 'optout'],
      ['+00000000000', 'optout'],
      ['refresh-optout@example.com', 'refresh-optout'],
      ['+00000000002', 'refresh-optout'],
      ['validate@example.com', 'validate'],
      ['+12345678901', 'validate'],
    ]);
    for (const i of identities) expect(i.hash).toBe(sha256Base64(i.identifier));
    expect(note).toContain('token-generate page');
  });
});
