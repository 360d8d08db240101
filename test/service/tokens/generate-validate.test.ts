import { describe, expect, it } from 'vitest';
import { normalizeEmail, sha256Base64 } from '../../../src/identity/index.js';
import type { HandlerResult } from '../../../src/service/contracts.js';
import {
  LOCAL_PUBLISHER,
  createTokenHandlers,
  decodeAdvertisingToken,
  deriveTokenKeys,
  encodeAdvertisingToken,
} from '../../../src/service/tokens/index.js';
import { FakeClock, FakeEngine, LIFETIMES, SEED, START_MS } from './fakes.js';

const REQUIRED = 'Required Parameter Missing: exactly one of [email, email_hash, phone, phone_hash] must be specified';
const clientError = (message: string) => ({ http: 400, json: { status: 'client_error', message } });

function setup() {
  const engine = new FakeEngine('UID2');
  const clock = new FakeClock(START_MS);
  const handlers = createTokenHandlers({ engine, clock, lifetimes: LIFETIMES, seed: SEED });
  return { engine, clock, handlers };
}

function identityOf(result: HandlerResult) {
  expect(result.http).toBe(200);
  expect(result.json.status).toBe('success');
  return (result.json as { body: Record<string, unknown> }).body as {
    advertising_token: string;
    refresh_token: string;
    identity_expires: number;
    refresh_expires: number;
    refresh_from: number;
    refresh_response_key: string;
  };
}

const EMAIL = 'Jane.Doe@Example.com';
const EMAIL_HASH = sha256Base64(normalizeEmail(EMAIL)!);
const PHONE = '+15555550123';
const PHONE_HASH = sha256Base64(PHONE);

describe('generate', () => {
  const inputs: [string, Record<string, string>, 'email' | 'phone', string][] = [
    ['raw email', { email: EMAIL }, 'email', EMAIL_HASH],
    ['base64 email hash', { email_hash: EMAIL_HASH }, 'email', EMAIL_HASH],
    ['hex email hash', { email_hash: Buffer.from(EMAIL_HASH, 'base64').toString('hex') }, 'email', EMAIL_HASH],
    ['raw phone', { phone: PHONE }, 'phone', PHONE_HASH],
    ['phone hash', { phone_hash: PHONE_HASH }, 'phone', PHONE_HASH],
  ];

  it.each(inputs)(
    '%s: issues an identity for the raw UID of its F, times from the clock',
    (_name, request, type, hash) => {
      const { engine, handlers } = setup();
      const body = identityOf(handlers.generate(request));
      expect(Object.keys(body)).toEqual([
        'advertising_token',
        'refresh_token',
        'identity_expires',
        'refresh_expires',
        'refresh_from',
        'refresh_response_key',
      ]);
      expect(body.identity_expires).toBe(START_MS + 3600_000);
      expect(body.refresh_expires).toBe(START_MS + 86400_000);
      expect(body.refresh_from).toBe(START_MS + 900_000);
      const decoded = decodeAdvertisingToken(deriveTokenKeys(SEED), body.advertising_token);
      if (!decoded.ok) throw new Error(decoded.reason);
      expect(decoded.token.type).toBe(type);
      expect(decoded.token.rawUid.toString('base64')).toBe(engine.rawUid(type, engine.firstLevelHash(hash), START_MS));
      expect(decoded.token.expiresMs).toBe(body.identity_expires);
      expect(decoded.token.establishedMs).toBe(START_MS);
      expect(decoded.token.privacyBits & 1).toBe(1);
    },
  );

  it('answers status success with exactly a body, and a fresh refresh_response_key each time', () => {
    const { handlers } = setup();
    const a = handlers.generate({ email: EMAIL });
    const b = handlers.generate({ email: EMAIL });
    expect(Object.keys(a.json)).toEqual(['status', 'body']);
    expect(identityOf(a).refresh_response_key).not.toBe(identityOf(b).refresh_response_key);
  });

  it('truncates a fractional clock to whole milliseconds', () => {
    const { clock, handlers } = setup();
    clock.now = START_MS + 0.75;
    expect(identityOf(handlers.generate({ email: EMAIL })).identity_expires).toBe(START_MS + 3600_000);
  });

  it('ignores optout_check, policy and unknown fields', () => {
    const { handlers } = setup();
    identityOf(handlers.generate({ email: EMAIL, optout_check: 0, policy: 0, extra: 'x' }));
  });

  it.each([
    ['no identity field', {}],
    ['two identity fields', { email: EMAIL, phone: PHONE }],
    ['email and its hash', { email: EMAIL, email_hash: EMAIL_HASH }],
    ['only nulls', { email: null, phone: null }],
    ['a JSON array', [EMAIL]],
    ['a JSON string', EMAIL],
    ['null', null],
  ])('%s -> 400 Required Parameter Missing', (_name, request) => {
    const { handlers } = setup();
    expect(handlers.generate(request)).toEqual(clientError(REQUIRED));
  });

  it('treats a null field as absent when another field is given', () => {
    const { handlers } = setup();
    identityOf(handlers.generate({ email: EMAIL, phone: null }));
  });

  it.each([
    ['email without @', { email: 'jane.example.com' }],
    ['empty email', { email: '' }],
    ['email with two @', { email: 'a@b@c.com' }],
    ['phone with spaces', { phone: '+1 555 555 0123' }],
    ['phone without +', { phone: '15555550123' }],
    ['short hash', { email_hash: 'abc' }],
    ['hash of wrong length', { phone_hash: PHONE_HASH.slice(0, 43) }],
    ['number instead of string', { email: 42 }],
  ])('%s -> 400 Invalid Identifier', (_name, request) => {
    const { handlers } = setup();
    expect(handlers.generate(request)).toEqual(clientError('Invalid Identifier'));
  });

  it('answers optout for an opted-out user, by raw value and by hash', () => {
    const { engine, handlers } = setup();
    engine.optOut(EMAIL_HASH);
    expect(handlers.generate({ email: EMAIL })).toEqual({ http: 200, json: { status: 'optout' } });
    expect(handlers.generate({ email_hash: EMAIL_HASH })).toEqual({ http: 200, json: { status: 'optout' } });
    identityOf(handlers.generate({ phone: PHONE }));
  });

  it.each([
    ['optout@example.com', { email: 'optout@example.com' }],
    ['+00000000000', { phone: '+00000000000' }],
    ['hash of optout@example.com', { email_hash: 'DYsnJ8r5+cjRDHue98gIGDKvLIMuqAm/RRLODrjqK50=' }],
  ])('always-optout test identity %s -> optout', (_name, request) => {
    const { handlers } = setup();
    expect(handlers.generate(request)).toEqual({ http: 200, json: { status: 'optout' } });
  });

  it('issues tokens to the refresh-optout and validate identities even if the registry lists them', () => {
    const { engine, handlers } = setup();
    for (const value of ['refresh-optout@example.com', 'validate@example.com']) {
      engine.optOut(sha256Base64(value));
      identityOf(handlers.generate({ email: value }));
    }
    identityOf(handlers.generate({ phone: '+00000000002' }));
    identityOf(handlers.generate({ phone: '+12345678901' }));
  });
});

describe('validate', () => {
  function tokenFor(request: Record<string, string>) {
    const ctx = setup();
    return { ...ctx, token: identityOf(ctx.handlers.generate(request)).advertising_token };
  }

  it('is true for the same DII, whether sent raw, as base64 hash or as hex hash', () => {
    const { handlers, token } = tokenFor({ email: EMAIL });
    const ok = { http: 200, json: { status: 'success', body: true } };
    expect(handlers.validate({ token, email: EMAIL })).toEqual(ok);
    expect(handlers.validate({ token, email: ' JANE.DOE@example.COM' })).toEqual(ok);
    expect(handlers.validate({ token, email_hash: EMAIL_HASH })).toEqual(ok);
    expect(handlers.validate({ token, email_hash: Buffer.from(EMAIL_HASH, 'base64').toString('hex') })).toEqual(ok);
  });

  it('is true for a phone token and its hash, false for another DII', () => {
    const { handlers, token } = tokenFor({ phone_hash: PHONE_HASH });
    expect(handlers.validate({ token, phone: PHONE })).toEqual({ http: 200, json: { status: 'success', body: true } });
    expect(handlers.validate({ token, phone: '+15555550124' })).toEqual({
      http: 200,
      json: { status: 'success', body: false },
    });
    expect(handlers.validate({ token, email: EMAIL })).toEqual({ http: 200, json: { status: 'success', body: false } });
  });

  it('does not check expiry, but compares with the raw UID of now (false after the salt rotates)', () => {
    const { engine, clock, handlers, token } = tokenFor({ email: 'validate@example.com' });
    clock.advanceS(LIFETIMES.refreshExpiresS * 10);
    expect(handlers.validate({ token, email: 'validate@example.com' }).json).toEqual({ status: 'success', body: true });
    engine.saltGeneration++;
    expect(handlers.validate({ token, email: 'validate@example.com' }).json).toEqual({
      status: 'success',
      body: false,
    });
  });

  it('gives the generate input errors before looking at the token', () => {
    const { handlers, token } = tokenFor({ email: EMAIL });
    expect(handlers.validate({ token })).toEqual(clientError(REQUIRED));
    expect(handlers.validate({ token, email: EMAIL, phone: PHONE })).toEqual(clientError(REQUIRED));
    expect(handlers.validate({ token, phone: '555' })).toEqual(clientError('Invalid Identifier'));
    expect(handlers.validate({ email: 'nope' })).toEqual(clientError('Invalid Identifier'));
  });

  it.each([
    ['missing', undefined],
    ['not a string', 17],
    ['empty', ''],
    ['not base64url', 'A4AAAA+/=='],
    ['truncated', 'A4AAAABx'],
  ])('token %s -> 400 Invalid token', (_name, token) => {
    const { handlers } = setup();
    expect(handlers.validate({ token, email: EMAIL })).toEqual(clientError('Invalid token'));
  });

  it('answers Invalid token for an altered token, one of another seed, and one of the other scope', () => {
    const { handlers, token } = tokenFor({ email: EMAIL });
    const bytes = Buffer.from(token, 'base64url');
    bytes[bytes.length - 1] ^= 0x40;
    expect(handlers.validate({ token: bytes.toString('base64url'), email: EMAIL })).toEqual(
      clientError('Invalid token'),
    );

    const foreign = createTokenHandlers({
      engine: new FakeEngine(),
      clock: new FakeClock(START_MS),
      lifetimes: LIFETIMES,
      seed: 'other',
    });
    const foreignToken = identityOf(foreign.generate({ email: EMAIL })).advertising_token;
    expect(handlers.validate({ token: foreignToken, email: EMAIL })).toEqual(clientError('Invalid token'));

    const euid = createTokenHandlers({
      engine: new FakeEngine('EUID'),
      clock: new FakeClock(START_MS),
      lifetimes: LIFETIMES,
      seed: SEED,
    });
    const euidToken = identityOf(euid.generate({ email: EMAIL })).advertising_token;
    expect(handlers.validate({ token: euidToken, email: EMAIL })).toEqual(clientError('Invalid token'));
  });

  it('answers Unauthorised to validate token for a token of another publisher site', () => {
    const { handlers, token } = tokenFor({ email: EMAIL });
    const keys = deriveTokenKeys(SEED);
    const decoded = decodeAdvertisingToken(keys, token);
    if (!decoded.ok) throw new Error(decoded.reason);
    expect(decoded.token.publisher.siteId).toBe(LOCAL_PUBLISHER.siteId);
    const otherSite = encodeAdvertisingToken(keys, {
      ...decoded.token,
      publisher: { ...LOCAL_PUBLISHER, siteId: 1234 },
    });
    expect(handlers.validate({ token: otherSite, email: EMAIL })).toEqual(
      clientError('Unauthorised to validate token'),
    );
  });
});
