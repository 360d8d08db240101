import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { UserError } from '../../src/cli/shared/exit-codes.js';
import { runTokenGenerate } from '../../src/cli/token/token-generate.js';
import { REFRESH_EXIT, runTokenRefresh } from '../../src/cli/token/token-refresh.js';
import { runTokenValidate } from '../../src/cli/token/token-validate.js';
import { RefreshKeyMismatchError } from '../../src/client/index.js';
import { sha256Base64 } from '../../src/identity/index.js';
import {
  ClientError,
  ClockSkewError,
  ExpiredTokenError,
  InvalidTokenError,
  UnauthorizedError,
} from '../../src/protocol/index.js';
import { captureIo, connectTo, fakeClient, identity } from './token-fakes.js';

const dir = mkdtempSync(join(tmpdir(), 'uid2-token-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function rejection(p: Promise<unknown>): Promise<UserError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(UserError);
  return err as UserError;
}

describe('token generate (one identity)', () => {
  it('normalizes and hashes locally and sends only the hash', async () => {
    const now = Date.now();
    const client = fakeClient({ generate: () => ({ status: 'success', identity: identity(now) }) });
    const io = captureIo('', now);
    const code = await runTokenGenerate({ email: '  Jane.Doe@GMail.com ' }, { io, connect: connectTo(client) });
    expect(code).toBe(0);
    expect(client.calls).toEqual([
      { method: 'tokenGenerate', args: [{ email_hash: sha256Base64('janedoe@gmail.com') }] },
    ]);
    const printed = JSON.parse(io.out());
    expect(Object.keys(printed)).toEqual([
      'advertising_token',
      'refresh_token',
      'identity_expires',
      'refresh_from',
      'refresh_expires',
      'refresh_response_key',
    ]);
  });

  it('sends a phone as phone_hash and a hex hash as base64', async () => {
    const client = fakeClient({ generate: () => ({ status: 'optout' }) });
    await runTokenGenerate({ phone: '+12345678901' }, { io: captureIo(), connect: connectTo(client) });
    const hex = Buffer.from(sha256Base64('a@b.com'), 'base64').toString('hex');
    await runTokenGenerate({ emailHash: hex }, { io: captureIo(), connect: connectTo(client) });
    expect(client.calls.map((c) => c.args[0])).toEqual([
      { phone_hash: sha256Base64('+12345678901') },
      { email_hash: sha256Base64('a@b.com') },
    ]);
  });

  it('refuses an invalid identifier with exit 2, without the value and without connecting', async () => {
    const client = fakeClient({});
    const connect = connectTo(client);
    const err = await rejection(runTokenGenerate({ phone: '555-123-4567' }, { io: captureIo(), connect }));
    expect(err.exitCode).toBe(2);
    expect(err.message).toContain('--phone');
    expect(err.message).toContain('E.164');
    expect(err.message).not.toContain('555');
    expect(connect.requests).toHaveLength(0);
    const email = await rejection(
      runTokenGenerate({ email: 'secret-person.example.com' }, { io: captureIo(), connect }),
    );
    expect(email.message).not.toContain('secret-person');
  });

  it('reads `--email -` from stdin, dropping only the line ending', async () => {
    const client = fakeClient({ generate: () => ({ status: 'optout' }) });
    await runTokenGenerate({ email: '-' }, { io: captureIo('Someone@Example.com\n'), connect: connectTo(client) });
    expect(client.calls[0]!.args[0]).toEqual({ email_hash: sha256Base64('someone@example.com') });
  });

  it('refuses two identifiers, and none', async () => {
    const connect = connectTo(fakeClient({}));
    expect(
      (await rejection(runTokenGenerate({ email: 'a@b.com', phone: '+12345678901' }, { io: captureIo(), connect })))
        .message,
    ).toContain('--email and --phone');
    expect((await rejection(runTokenGenerate({}, { io: captureIo(), connect }))).exitCode).toBe(2);
  });

  it('prints {"status":"optout"} with a note and exits 5, as refresh does', async () => {
    const io = captureIo();
    const out = join(dir, 'never.json');
    const code = await runTokenGenerate(
      { email: 'optout@example.com', out },
      { io, connect: connectTo(fakeClient({ generate: () => ({ status: 'optout' }) })) },
    );
    expect(code).toBe(5);
    expect(code).toBe(REFRESH_EXIT.optout);
    expect(JSON.parse(io.out())).toEqual({ status: 'optout' });
    expect(io.err()).toMatch(/optout: .*opted out.*not written/);
    expect(() => statSync(out)).toThrow();
  });

  it('--out saves the identity 0600 in a form refresh reads back', async () => {
    const now = Date.now();
    const id = identity(now);
    const out = join(dir, 'id.json');
    const io = captureIo('', now);
    await runTokenGenerate(
      { email: 'a@example.com', out },
      { io, connect: connectTo(fakeClient({ generate: () => ({ status: 'success', identity: id }) })) },
    );
    expect(statSync(out).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(out, 'utf8'))).toEqual(id);
    expect(io.err()).toContain(`token refresh --in ${out} --update`);
  });

  it('names the missing role on 401 (exit 4), a wrong secret, and clock skew', async () => {
    const refuse = (err: Error) => connectTo(fakeClient({ generate: () => Promise.reject(err) }));
    const unauthorized = await rejection(
      runTokenGenerate(
        { email: 'a@example.com' },
        { io: captureIo(), connect: refuse(new UnauthorizedError(401, 'unauthorized', undefined)) },
      ),
    );
    expect(unauthorized.exitCode).toBe(4);
    expect(unauthorized.message).toContain('lacks the GENERATOR role or is wrong');
    const secret = await rejection(
      runTokenGenerate(
        { email: 'a@example.com' },
        {
          io: captureIo(),
          connect: refuse(
            new ClientError(
              400,
              'client_error',
              'Invalid body: Check encryption key (ClientSecret). See https://unifiedid.com/docs',
            ),
          ),
        },
      ),
    );
    expect(secret.message).toContain('client secret does not match the API key');
    const skew = await rejection(
      runTokenGenerate(
        { email: 'a@example.com' },
        {
          io: captureIo(),
          connect: refuse(
            new ClockSkewError(400, 'client_error', 'Invalid timestamp: Request too old or client time drift.'),
          ),
        },
      ),
    );
    expect(skew.message).toMatch(/^clock skew: .*NTP/);
  });
});

describe('token refresh', () => {
  function saved(name: string, now: number) {
    const id = identity(now - 1_000_000);
    const path = join(dir, name);
    writeFileSync(path, JSON.stringify(id));
    return { id, path };
  }

  it('needs no credentials, decrypts with the identity key, and --update rewrites the file atomically 0600', async () => {
    const now = Date.now();
    const { id, path } = saved('chain.json', now);
    const next = identity(now);
    const client = fakeClient({ refresh: () => ({ status: 'success', identity: next }) });
    const connect = connectTo(client);
    const io = captureIo('', now);
    const code = await runTokenRefresh({ in: path, update: true }, { io, connect });
    expect(code).toBe(0);
    expect(connect.requests).toEqual([{ apiKey: false, clientSecret: false }]);
    expect(client.calls[0]!.args).toEqual([id.refresh_token, id.refresh_response_key]);
    expect(JSON.parse(readFileSync(path, 'utf8'))).toEqual(next);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(JSON.parse(io.out())).toEqual(next);
  });

  it('reads the identity JSON (or a whole service answer) from stdin', async () => {
    const now = Date.now();
    const id = identity(now - 1_000_000);
    const client = fakeClient({ refresh: () => ({ status: 'success', identity: identity(now) }) });
    await runTokenRefresh(
      {},
      { io: captureIo(JSON.stringify({ status: 'success', body: id }), now), connect: connectTo(client) },
    );
    expect(client.calls[0]!.args).toEqual([id.refresh_token, id.refresh_response_key]);
  });

  it('refuses a TTY stdin with nothing given, and a bad identity without showing it', async () => {
    const connect = connectTo(fakeClient({}));
    const tty = await rejection(runTokenRefresh({}, { io: captureIo('', Date.now(), true), connect }));
    expect(tty.message).toContain('--in FILE');
    const bad = await rejection(
      runTokenRefresh({}, { io: captureIo('{"refresh_token":"abc","refresh_response_key":"k"}'), connect }),
    );
    expect(bad.message).toContain('lacks advertising_token');
    expect(bad.message).not.toContain('abc');
  });

  it('takes the token and key from files, and warns about argv values', async () => {
    const now = Date.now();
    const id = identity(now);
    const tokenFile = join(dir, 'rt.txt');
    const keyFile = join(dir, 'rk.txt');
    writeFileSync(tokenFile, `${id.refresh_token}\n`);
    writeFileSync(keyFile, `${id.refresh_response_key}\n`);
    const client = fakeClient({ refresh: () => ({ status: 'success', identity: identity(now) }) });
    const io = captureIo('', now);
    await runTokenRefresh(
      { refreshTokenFile: tokenFile, refreshResponseKeyFile: keyFile },
      { io, connect: connectTo(client) },
    );
    expect(client.calls[0]!.args).toEqual([id.refresh_token, id.refresh_response_key]);
    expect(io.err()).not.toContain('warning');
    const io2 = captureIo('', now);
    await runTokenRefresh(
      { refreshToken: id.refresh_token, refreshResponseKey: id.refresh_response_key },
      { io: io2, connect: connectTo(client) },
    );
    expect(io2.err()).toMatch(/--refresh-token and --refresh-response-key .*`ps` and shell history/);
    expect(io2.err()).not.toContain(id.refresh_response_key);
  });

  it('refuses a malformed refresh_response_key before sending (exit 2)', async () => {
    const client = fakeClient({});
    const err = await rejection(
      runTokenRefresh(
        { refreshToken: 'x'.repeat(388), refreshResponseKey: 'not-a-key' },
        { io: captureIo(), connect: connectTo(client) },
      ),
    );
    expect(err.exitCode).toBe(2);
    expect(err.message).toContain('refresh_response_key');
    expect(err.message).not.toContain('not-a-key');
    expect(client.calls).toHaveLength(0);
  });

  it('warns before refresh_from, refuses after refresh_expires unless --force', async () => {
    const now = Date.now();
    const early = identity(now);
    const client = fakeClient({ refresh: () => ({ status: 'success', identity: identity(now) }) });
    const io = captureIo(JSON.stringify(early), now);
    expect(await runTokenRefresh({ in: '-' }, { io, connect: connectTo(client) })).toBe(0);
    expect(io.err()).toMatch(/warning: refresh_from is 15 min away/);

    const old = { ...identity(now), refresh_expires: now - 5000 };
    const refused = captureIo(JSON.stringify(old), now);
    const calls = client.calls.length;
    expect(await runTokenRefresh({}, { io: refused, connect: connectTo(client) })).toBe(REFRESH_EXIT.expiredToken);
    expect(refused.err()).toMatch(/expired: .*--force/);
    expect(client.calls).toHaveLength(calls);

    const forced = captureIo(JSON.stringify(old), now);
    expect(await runTokenRefresh({ force: true }, { io: forced, connect: connectTo(client) })).toBe(0);
    expect(client.calls).toHaveLength(calls + 1);
  });

  const outcomes: [string, () => never | { status: 'optout' }, number, RegExp][] = [
    ['optout', () => ({ status: 'optout' }), REFRESH_EXIT.optout, /^uid2-batch: optout: the user has opted out/m],
    [
      'invalid_token',
      () => {
        throw new InvalidTokenError(400, 'invalid_token', 'Invalid Token presented');
      },
      REFRESH_EXIT.invalidToken,
      /invalid_token: .*Generate a new identity/,
    ],
    [
      'client_error',
      () => {
        throw new ClientError(400, 'client_error', 'Invalid data: Check encryption method and encryption key.');
      },
      REFRESH_EXIT.invalidToken,
      /invalid refresh token: the service cannot read it/,
    ],
    [
      'expired_token',
      () => {
        throw new ExpiredTokenError(400, 'expired_token', 'Expired Token presented');
      },
      REFRESH_EXIT.expiredToken,
      /expired_token: /,
    ],
    [
      'error',
      () => {
        throw new ClientError(400, 'error', 'Error refreshing token');
      },
      REFRESH_EXIT.refreshError,
      /error: .*invalid or expired.*UID2_API_KEY/,
    ],
  ];
  it.each(outcomes)('%s has its own exit code and one line', async (_name, answer, exitCode, line) => {
    const now = Date.now();
    const io = captureIo(JSON.stringify(identity(now - 1_000_000)), now);
    expect(await runTokenRefresh({}, { io, connect: connectTo(fakeClient({ refresh: answer })) })).toBe(exitCode);
    expect(io.err()).toMatch(line);
    expect(io.err().trim().split('\n')).toHaveLength(1);
  });

  it('distinct exit codes, apart from the shared ones', () => {
    const codes = Object.values(REFRESH_EXIT);
    expect(new Set(codes).size).toBe(codes.length);
    for (const c of codes) expect([0, 1, 2, 3, 4, 130]).not.toContain(c);
  });

  it('an older key says which key to use (exit 2); --update leaves the file alone on failure', async () => {
    const now = Date.now();
    const { id, path } = saved('mismatch.json', now);
    const client = fakeClient({
      refresh: () => {
        throw new RefreshKeyMismatchError();
      },
    });
    const err = await rejection(
      runTokenRefresh({ in: path, update: true }, { io: captureIo('', now), connect: connectTo(client) }),
    );
    expect(err.exitCode).toBe(2);
    expect(err.message).toContain('does not belong to this refresh_token');
    expect(JSON.parse(readFileSync(path, 'utf8'))).toEqual(id);
  });

  it('--update needs --in FILE', async () => {
    expect(
      (await rejection(runTokenRefresh({ update: true }, { io: captureIo(), connect: connectTo(fakeClient({})) })))
        .message,
    ).toContain('--in FILE');
  });
});

describe('token validate (one token)', () => {
  it('prints true, exit 0, sending the hash', async () => {
    const client = fakeClient({ validate: () => true });
    const io = captureIo();
    expect(await runTokenValidate({ token: 'A4tok', phone: '+12345678901' }, { io, connect: connectTo(client) })).toBe(
      0,
    );
    expect(io.out()).toBe('true\n');
    expect(client.calls[0]!.args[0]).toEqual({ token: 'A4tok', phone_hash: sha256Base64('+12345678901') });
  });

  it('prints false, exit 1, with the formatting hint and the hash sent', async () => {
    const io = captureIo();
    expect(
      await runTokenValidate(
        { token: 'A4tok', email: 'User@Example.com' },
        { io, connect: connectTo(fakeClient({ validate: () => false })) },
      ),
    ).toBe(1);
    expect(io.out()).toBe('false\n');
    expect(io.err()).toContain('input formatting');
    expect(io.err()).toContain('E.164');
    expect(io.err()).toContain(sha256Base64('user@example.com'));
    expect(io.err()).not.toContain('User@Example.com');
  });

  it('explains a token the service cannot read', async () => {
    const client = fakeClient({
      validate: () => {
        throw new ClientError(400, 'client_error', 'Invalid token');
      },
    });
    const err = await rejection(
      runTokenValidate({ token: 'junk', email: 'a@b.com' }, { io: captureIo(), connect: connectTo(client) }),
    );
    expect(err.message).toContain('cannot read this advertising token');
    // not `false` (1): a distinct code
    expect(err.exitCode).toBe(6);
  });

  it('needs a token and an identifier; --input excludes both', async () => {
    const connect = connectTo(fakeClient({}));
    expect((await rejection(runTokenValidate({ email: 'a@b.com' }, { io: captureIo(), connect }))).message).toContain(
      '--token',
    );
    expect((await rejection(runTokenValidate({ token: 't' }, { io: captureIo(), connect }))).message).toContain(
      '--email',
    );
    expect(
      (await rejection(runTokenValidate({ token: 't', input: 'x.csv' }, { io: captureIo(), connect }))).message,
    ).toContain('--input');
  });
});
