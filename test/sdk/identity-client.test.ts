// The library as a user imports it ('uid2-batch', the built package), every call against startLocalService() and
// the local service's test identities: results, types, per-item problems, and typed errors before anything is sent.
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import {
  AbortError,
  ArgumentError,
  ClientError,
  DecryptError,
  hashIdentifier,
  IdentityClient,
  type IdentityMapResult,
  type LocalServiceHandle,
  type MapIdentitiesResult,
  NetworkError,
  normalizeEmail,
  normalizePhone,
  RateLimitedError,
  ServerError,
  TimeoutError,
  type RefreshTokenResult,
  startLocalService,
  type GenerateTokenResult,
  type TokenIdentity,
  Uid2Error,
  UnauthorizedError,
} from 'uid2-batch';

let svc: LocalServiceHandle;
let client: IdentityClient;

/** Requests the local service has received, all paths together. */
const requestsSeen = (): number => Object.values(svc.stats().requests).reduce((a, b) => a + b, 0);

beforeAll(async () => {
  svc = await startLocalService();
  client = new IdentityClient({ baseUrl: svc.url, apiKey: svc.apiKey, clientSecret: svc.clientSecret });
});

afterAll(async () => {
  await client?.close();
  await svc?.stop();
});

describe('startLocalService', () => {
  it('gives a loopback URL and credentials', () => {
    expect(svc.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(Buffer.from(svc.clientSecret, 'base64')).toHaveLength(32);
    expectTypeOf(svc.stop).returns.resolves.toEqualTypeOf<void>();
  });
});

describe('generateToken, refreshToken, validateToken', () => {
  it('generates an identity for an email, and optout for the opt-out test identity', async () => {
    const answer = await client.generateToken({ email: 'user@example.com' });
    expectTypeOf(answer).toEqualTypeOf<GenerateTokenResult>();
    expect(answer.status).toBe('success');
    if (answer.status !== 'success') return;
    expectTypeOf(answer.identity).toEqualTypeOf<TokenIdentity>();
    expect(answer.identity.advertising_token.length).toBeGreaterThan(20);
    expect(answer.identity.refresh_expires).toBeGreaterThan(answer.identity.identity_expires);
    expect(await client.generateToken({ email: 'optout@example.com' })).toEqual({ status: 'optout' });
    expect(await client.generateToken({ phone: '+00000000000' })).toEqual({ status: 'optout' });
  });

  it('reads a national phone in the region given', async () => {
    const answer = await client.generateToken({ phone: '(415) 555-0100' }, { phoneRegion: 'US' });
    expect(answer.status).toBe('success');
  });

  it('refreshes an identity, with or without an API key, and says optout for refresh-optout', async () => {
    const first = await client.generateToken({ email: 'user@example.com' });
    if (first.status !== 'success') throw new Error('generate failed');
    const next = await client.refreshToken(first.identity);
    expectTypeOf(next).toEqualTypeOf<RefreshTokenResult>();
    expect(next.status).toBe('success');
    const keyless = new IdentityClient({ baseUrl: svc.url });
    try {
      if (next.status !== 'success') throw new Error('refresh failed');
      expect((await keyless.refreshToken(next.identity)).status).toBe('success');
    } finally {
      await keyless.close();
    }
    const other = await client.generateToken({ email: 'other@example.com' });
    if (other.status !== 'success') throw new Error('generate failed');
    const mixed = { ...first.identity, refresh_response_key: other.identity.refresh_response_key };
    const err = await client.refreshToken(mixed).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DecryptError);
    expect(err).toMatchObject({ code: 'decrypt' });
    expect((err as Error).message).not.toContain(other.identity.refresh_response_key);
    const doomed = await client.generateToken({ email: 'refresh-optout@example.com' });
    if (doomed.status !== 'success') throw new Error('generate failed');
    expect(await client.refreshToken(doomed.identity)).toEqual({ status: 'optout' });
  });

  it('validates a token of the validate test identity', async () => {
    const answer = await client.generateToken({ email: 'validate@example.com' });
    if (answer.status !== 'success') throw new Error('generate failed');
    const token = answer.identity.advertising_token;
    const same = await client.validateToken(token, { email: 'validate@example.com' });
    expectTypeOf(same).toEqualTypeOf<boolean>();
    expect(same).toBe(true);
    expect(await client.validateToken(token, { email: 'someone.else@example.com' })).toBe(false);
    const unreadable = await client
      .validateToken('not-a-token', { email: 'validate@example.com' })
      .catch((e: unknown) => e);
    expect(unreadable).toBeInstanceOf(ClientError);
    expect(unreadable).toMatchObject({ code: 'client_error', httpStatus: 400 });
  });
});

describe('mapIdentities', () => {
  it('maps every kind, with results aligned to the inputs and per-item problems as results', async () => {
    const email = ['jane@example.com', 'not an email', 'optout@example.com', 'JANE@example.com', ''];
    const phone = ['+14155550100', '415-555-0100'];
    const emailHash = [hashIdentifier('email', 'jane@example.com') as string, 'zz'];
    const out = await client.mapIdentities({ email, phone, emailHash });
    expectTypeOf(out).toEqualTypeOf<MapIdentitiesResult>();
    expectTypeOf(out.email[0]).toEqualTypeOf<IdentityMapResult>();
    expect(out.email.map((r) => r.status)).toEqual(['mapped', 'invalid', 'optout', 'mapped', 'invalid']);
    expect(out.phone.map((r) => r.status)).toEqual(['mapped', 'invalid']);
    expect(out.emailHash.map((r) => r.status)).toEqual(['mapped', 'invalid']);
    expect(out.phoneHash).toEqual([]);
    const jane = out.email[0];
    if (jane.status !== 'mapped') throw new Error('not mapped');
    expect(jane.rawUid).toMatch(/^[A-Za-z0-9+/]{43}=$/);
    expect(jane.refreshFrom).toBeInstanceOf(Date);
    expect(jane.refreshFrom.getTime()).toBeGreaterThan(Date.now());
    // the same person by normalized email, by upper case, and by hash
    expect(out.email[3]).toEqual(jane);
    expect(out.emailHash[0]).toEqual(jane);
    expect(out.email[1]).toEqual({ status: 'invalid', reason: 'invalid email' });
  });

  it('reads national phones in the region given, on the call or the client', async () => {
    const byCall = await client.mapIdentities({ phone: ['(415) 555-0100'] }, { phoneRegion: 'US' });
    const e164 = await client.mapIdentities({ phone: ['+14155550100'] });
    expect(byCall.phone).toEqual(e164.phone);
    const regional = new IdentityClient({
      baseUrl: svc.url,
      apiKey: svc.apiKey,
      clientSecret: svc.clientSecret,
      phoneRegion: 'us',
    });
    try {
      expect((await regional.mapIdentities({ phone: ['415.555.0100'] })).phone).toEqual(e164.phone);
    } finally {
      await regional.close();
    }
  });

  it('batches a long list: 5,000 identifiers a request at most', async () => {
    const before = svc.stats().requests['/v3/identity/map'] ?? 0;
    const email = Array.from({ length: 12_001 }, (_, i) => `batch.${i}@example.com`);
    const out = await client.mapIdentities({ email });
    expect(out.email).toHaveLength(12_001);
    expect(out.email.every((r) => r.status === 'mapped')).toBe(true);
    expect(new Set(out.email.map((r) => (r.status === 'mapped' ? r.rawUid : ''))).size).toBe(12_001);
    expect((svc.stats().requests['/v3/identity/map'] ?? 0) - before).toBe(3);
  });
});

describe('checkOptOut', () => {
  it('answers the raw UIDs opted out, with since when', async () => {
    const mapped = await client.mapIdentities({ email: ['stays@example.com', 'leaves@example.com'] });
    const [stays, leaves] = mapped.email.map((r) => (r.status === 'mapped' ? r.rawUid : ''));
    const sinceMs = Date.UTC(2026, 0, 2, 3, 4, 5);
    const answer = await fetch(`${svc.url}/_local/optout`, {
      method: 'POST',
      body: JSON.stringify({ advertising_id: leaves, since_ms: sinceMs }),
    });
    expect(answer.status).toBe(200);
    const out = await client.checkOptOut([stays, leaves, leaves]);
    expectTypeOf(out).toEqualTypeOf<Map<string, Date>>();
    expect([...out]).toEqual([[leaves, new Date(sinceMs)]]);
  });
});

describe('normalization and hashing, as the CLI does them', () => {
  it('normalizes emails and phones and hashes identifiers', () => {
    expect(normalizeEmail('Jane.Doe+ads@GMail.com')).toBe('janedoe@gmail.com');
    expect(normalizePhone('+14155550100')).toEqual({ ok: true, e164: '+14155550100' });
    expect(normalizePhone('(415) 555-0100', 'US')).toEqual({ ok: true, e164: '+14155550100' });
    expect(normalizePhone('(415) 555-0100').ok).toBe(false);
    expect(hashIdentifier('email', 'jane@example.com')).toBe(hashIdentifier('email', ' Jane@Example.com '));
    expect(hashIdentifier('phone', '+14155550100')).toBe(createHash('sha256').update('+14155550100').digest('base64'));
    expect(hashIdentifier('email', 'nope')).toBeNull();
    expect(() => normalizePhone('0612345678', 'XX')).toThrow(ArgumentError);
  });
});

describe('wrong arguments throw an ArgumentError before anything is sent', () => {
  const cases: [string, () => Promise<unknown>, RegExp][] = [
    ['an empty list', () => client.mapIdentities({ email: [] }), /input\.email is empty/],
    ['no list', () => client.mapIdentities({}), /no identifiers/],
    ['a misspelt key', () => client.mapIdentities({ emails: ['a@b.c'] } as never), /unknown key emails/],
    [
      'a non-string item',
      () => client.mapIdentities({ email: ['a@b.c', 42 as never] }),
      /input\.email\[1\] must be a string/,
    ],
    [
      'a non-string identifier',
      () => client.generateToken({ email: 7 as never }),
      /identifier\.email must be a string/,
    ],
    ['two identifiers', () => client.generateToken({ email: 'a@b.c', phone: '+14155550100' } as never), /exactly one/],
    [
      'an invalid email',
      () => client.generateToken({ email: 'nope' }),
      /identifier\.email is not valid: invalid email/,
    ],
    [
      'an identity without its refresh token',
      () => client.refreshToken({ refresh_response_key: svc.clientSecret } as never),
      /has no refresh_token/,
    ],
    ['an empty token', () => client.validateToken('', { email: 'validate@example.com' }), /token is empty/],
    ['a raw UID that is not one', () => client.checkOptOut(['abc']), /rawUids\[0\] is not a raw UID/],
    ['a region that is not ISO 3166', () => client.mapIdentities({ phone: ['1'] }, { phoneRegion: 'USA' }), /ISO 3166/],
    [
      'a signal that is not one',
      () => client.generateToken({ email: 'a@b.c' }, { signal: 'x' as never }),
      /AbortSignal/,
    ],
  ];
  it.each(cases)('%s', async (_name, call, message) => {
    const before = requestsSeen();
    const err = await call().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ArgumentError);
    expect(err).toMatchObject({ code: 'invalid_argument', message: expect.stringMatching(message) });
    expect(requestsSeen()).toBe(before);
  });

  it('checks the client options when it is made', () => {
    expect(() => new IdentityClient({ env: 'staging' })).toThrow(/unknown IdentityClient options\.env 'staging'/);
    expect(() => new IdentityClient({ env: 'local' })).toThrow(/startLocalService/);
    expect(() => new IdentityClient({ baseUrl: 'http://10.0.0.8:8080' })).toThrow(/insecureHttp: true/);
    expect(() => new IdentityClient({ baseUrl: 'http://10.0.0.8:8080', insecureHttp: true })).not.toThrow();
    expect(() => new IdentityClient({ env: 'integ', clientSecret: 'c2VjcmV0' })).toThrow(/clientSecret is not/);
    expect(() => new IdentityClient({ env: 'integ', phoneRegion: 'Narnia' })).toThrow(ArgumentError);
    expect(() => new IdentityClient({ env: 'prod', proxy: 'socks5://p:1080' })).toThrow(/proxy/);
  });

  it('asks for credentials where a call needs them', async () => {
    const keyless = new IdentityClient({ baseUrl: svc.url });
    try {
      await expect(keyless.mapIdentities({ email: ['a@b.c'] })).rejects.toThrow(/needs an API key and a client secret/);
    } finally {
      await keyless.close();
    }
  });
});

describe('failures are typed errors with a stable code', () => {
  it('a refused API key is an UnauthorizedError, whatever the call', async () => {
    const wrong = new IdentityClient({ baseUrl: svc.url, apiKey: 'not-the-key', clientSecret: svc.clientSecret });
    try {
      for (const call of [
        () => wrong.generateToken({ email: 'user@example.com' }),
        () => wrong.mapIdentities({ email: ['user@example.com'] }),
        () => wrong.checkOptOut([Buffer.alloc(32, 1).toString('base64')]),
      ]) {
        const err = await call().catch((e: unknown) => e);
        expect(err).toBeInstanceOf(UnauthorizedError);
        expect(err).toBeInstanceOf(Uid2Error);
        expect(err).toMatchObject({ code: 'unauthorized', httpStatus: 401 });
        expect(String((err as Error).message)).not.toContain('not-the-key');
      }
    } finally {
      await wrong.close();
    }
  });

  it('no service listening is a NetworkError', async () => {
    const gone = await startLocalService();
    const { url, apiKey, clientSecret } = gone;
    await gone.stop();
    const lost = new IdentityClient({ baseUrl: url, apiKey, clientSecret, maxAttempts: 1 });
    try {
      const err = await lost.generateToken({ email: 'user@example.com' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(NetworkError);
      expect(err).toMatchObject({ code: 'network', failure: 'refused' });
    } finally {
      await lost.close();
    }
  });

  it('429s and 5xx after the last attempt are RateLimitedError and ServerError; a slow answer is a TimeoutError', async () => {
    const faulty = await startLocalService({ faults: { p429: 1, latencyMs: 0 } });
    const failing = await startLocalService({ faults: { p500: 1 } });
    const slow = await startLocalService({ faults: { latencyMs: 2_000 } });
    const clients = [faulty, failing, slow].map(
      (s) =>
        new IdentityClient({
          baseUrl: s.url,
          apiKey: s.apiKey,
          clientSecret: s.clientSecret,
          maxAttempts: 1,
          timeoutMs: 300,
        }),
    );
    try {
      const [limited, broken, late] = await Promise.all(
        clients.map((c) => c.mapIdentities({ email: ['user@example.com'] }).catch((e: unknown) => e)),
      );
      expect(limited).toBeInstanceOf(RateLimitedError);
      expect(limited).toMatchObject({ code: 'rate_limited', httpStatus: 429, retryable: true });
      expect(broken).toBeInstanceOf(ServerError);
      expect(broken).toMatchObject({ code: 'server_error', httpStatus: 500 });
      expect(late).toBeInstanceOf(TimeoutError);
      expect(late).toBeInstanceOf(NetworkError);
      expect(late).toMatchObject({ code: 'timeout' });
    } finally {
      await Promise.all(clients.map((c) => c.close()));
      await Promise.all([faulty, failing, slow].map((s) => s.stop()));
    }
  });

  it('a signal that fires while a call is in flight stops it with an AbortError', async () => {
    const slow = await startLocalService({ faults: { latencyMs: 1_000 } });
    const patient = new IdentityClient({ baseUrl: slow.url, apiKey: slow.apiKey, clientSecret: slow.clientSecret });
    try {
      const started = Date.now();
      const [token, map] = await Promise.all([
        patient
          .generateToken({ email: 'user@example.com' }, { signal: AbortSignal.timeout(100) })
          .catch((e: unknown) => e),
        patient
          .mapIdentities({ email: ['user@example.com'] }, { signal: AbortSignal.timeout(100) })
          .catch((e: unknown) => e),
      ]);
      expect(token).toBeInstanceOf(AbortError);
      expect(map).toBeInstanceOf(AbortError);
      expect(Date.now() - started).toBeLessThan(5_000);
    } finally {
      await patient.close();
      await slow.stop();
    }
  });

  it('an aborted signal stops every call with an AbortError', async () => {
    const signal = AbortSignal.abort();
    const before = requestsSeen();
    for (const call of [
      () => client.generateToken({ email: 'user@example.com' }, { signal }),
      () => client.mapIdentities({ email: ['user@example.com'] }, { signal }),
      () => client.checkOptOut([Buffer.alloc(32, 1).toString('base64')], { signal }),
    ]) {
      const err = await call().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(AbortError);
      expect(err).toMatchObject({ code: 'aborted' });
    }
    expect(requestsSeen()).toBe(before);
  });
});
