import { describe, expect, it } from 'vitest';
import { sha256Base64 } from '../../../src/identity/index.js';
import {
  EnvelopeError,
  decodeKey,
  decryptRefreshResponse,
  encryptRefreshResponse,
} from '../../../src/protocol/index.js';
import type { IdentityScope, RefreshResult, TokenHandlers } from '../../../src/service/contracts.js';
import {
  createTokenHandlers,
  decodeAdvertisingToken,
  deriveTokenKeys,
  unwrapRefreshToken,
  type TokenKey,
} from '../../../src/service/tokens/index.js';
import { FakeClock, FakeEngine, LIFETIMES, SEED, START_MS } from './fakes.js';

interface Identity {
  advertising_token: string;
  refresh_token: string;
  identity_expires: number;
  refresh_expires: number;
  refresh_from: number;
  refresh_response_key: string;
}

function setup(scope: IdentityScope = 'UID2', seed = SEED) {
  const engine = new FakeEngine(scope);
  const clock = new FakeClock(START_MS);
  const handlers = createTokenHandlers({ engine, clock, lifetimes: LIFETIMES, seed });
  return { engine, clock, handlers };
}

function generate(handlers: TokenHandlers, request: Record<string, string>): Identity {
  const result = handlers.generate(request);
  if (result.http !== 200 || result.json.status !== 'success')
    throw new Error(`generate: ${JSON.stringify(result.json)}`);
  return result.json.body as Identity;
}

/** What a client reads: the core encrypts a 200 with `responseKey`; the client opens it with the key it holds. */
function clientReads(result: RefreshResult, heldKey: string): Record<string, unknown> {
  if (result.http !== 200) throw new Error(`refresh answered ${result.http}: ${JSON.stringify(result.json)}`);
  const sent = encryptRefreshResponse(result.responseKey, JSON.stringify(result.json));
  return JSON.parse(
    decryptRefreshResponse(decodeKey(heldKey, 'refresh_response_key'), sent).toString('utf8'),
  ) as Record<string, unknown>;
}

function refreshOk(handlers: TokenHandlers, current: Identity, authenticated = false): Identity {
  const answer = clientReads(handlers.refresh(current.refresh_token, authenticated), current.refresh_response_key);
  expect(answer.status).toBe('success');
  return answer.body as Identity;
}

/** A 388-char wrapper around any JSON text, padded with trailing spaces (still the same JSON) to 258 bytes. */
function wrapperOf(json: string, key: TokenKey, options: { keyId?: number; scopeByte?: number } = {}): string {
  const padded = json.padEnd(258, ' ');
  const header = Buffer.alloc(5);
  header.writeUInt8(options.scopeByte ?? 0, 0);
  header.writeInt32BE(options.keyId ?? key.id, 1);
  const text = Buffer.concat([header, encryptRefreshResponse(key.secret, padded)]).toString('base64');
  expect(text).toHaveLength(388);
  return text;
}

const RESPONSE_KEY = Buffer.alloc(32, 7).toString('base64');

function wrapperAround(innerToken: string, keys = deriveTokenKeys(SEED)): string {
  return wrapperOf(JSON.stringify({ refresh_response_key: RESPONSE_KEY, refresh_token: innerToken }), keys.refresh);
}

function innerTokenOf(wrapper: string): string {
  const opened = unwrapRefreshToken(deriveTokenKeys(SEED), wrapper);
  if (!opened.ok) throw new Error(opened.failure);
  return opened.innerToken;
}

const clientError = (message: string) => ({ http: 400, json: { status: 'client_error', message } });
const INVALID = { http: 400, json: { status: 'invalid_token', message: 'Invalid Token presented' } };
const EXPIRED = { http: 400, json: { status: 'expired_token', message: 'Expired Token presented' } };
const HIDDEN = { http: 400, json: { status: 'error', message: 'Error refreshing token' } };

describe('refresh: success', () => {
  it('chains 4 refreshes, each answer readable only with the key issued with the presented token', () => {
    const { clock, handlers } = setup();
    let current = generate(handlers, { email: 'chain@example.com' });
    const seenKeys = new Set([current.refresh_response_key]);
    const seenTokens = new Set([current.refresh_token]);
    for (let i = 0; i < 4; i++) {
      clock.advanceS(LIFETIMES.refreshFromS);
      const previous = current;
      const result = handlers.refresh(previous.refresh_token, i % 2 === 0);
      current = clientReads(result, previous.refresh_response_key).body as Identity;
      if (seenKeys.size > 1) {
        // A key from before the presented token's cannot open the answer.
        const stale = [...seenKeys][0]!;
        expect(() => clientReads(result, stale)).toThrow(EnvelopeError);
      }
      expect(seenKeys.has(current.refresh_response_key)).toBe(false);
      expect(seenTokens.has(current.refresh_token)).toBe(false);
      seenKeys.add(current.refresh_response_key);
      seenTokens.add(current.refresh_token);
      expect(current.refresh_token).toHaveLength(388);
      expect(current.advertising_token).toHaveLength(218);
      expect(current.identity_expires).toBe(clock.now + 3600_000);
      expect(current.refresh_expires).toBe(clock.now + 86400_000);
      expect(current.refresh_from).toBe(clock.now + 900_000);
      expect(() => clientReads(result, current.refresh_response_key)).toThrow(EnvelopeError);
    }
    expect(seenKeys.size).toBe(5);
  });

  it('keeps the established time and the raw UID, and sets created and refreshed to now', () => {
    const { engine, clock, handlers } = setup();
    const first = generate(handlers, { phone: '+15555550100' });
    clock.advanceS(1000);
    const second = refreshOk(handlers, first);
    const keys = deriveTokenKeys(SEED);
    const a = decodeAdvertisingToken(keys, first.advertising_token);
    const b = decodeAdvertisingToken(keys, second.advertising_token);
    if (!a.ok || !b.ok) throw new Error('decode failed');
    expect(b.token.type).toBe('phone');
    expect(b.token.establishedMs).toBe(START_MS);
    expect(b.token.createdMs).toBe(START_MS + 1_000_000);
    expect(b.token.refreshedMs).toBe(START_MS + 1_000_000);
    expect(b.token.rawUid.equals(a.token.rawUid)).toBe(true);
    expect(b.token.rawUid.toString('base64')).toBe(
      engine.rawUid('phone', engine.firstLevelHash(sha256Base64('+15555550100')), clock.now),
    );
  });

  it('gives the current raw UID after a salt rotation (the token holds F)', () => {
    const { engine, handlers } = setup();
    const first = generate(handlers, { email: 'rotated@example.com' });
    const keys = deriveTokenKeys(SEED);
    engine.saltGeneration++;
    const second = refreshOk(handlers, first);
    const before = decodeAdvertisingToken(keys, first.advertising_token);
    const after = decodeAdvertisingToken(keys, second.advertising_token);
    if (!before.ok || !after.ok) throw new Error('decode failed');
    const f = engine.firstLevelHash(sha256Base64('rotated@example.com'));
    expect(after.token.rawUid.toString('base64')).toBe(engine.rawUid('email', f, 0));
    expect(after.token.rawUid.equals(before.token.rawUid)).toBe(false);
    expect(handlers.validate({ token: second.advertising_token, email: 'rotated@example.com' })).toEqual({
      http: 200,
      json: { status: 'success', body: true },
    });
  });

  it('refreshes tokens of a previous instance with the same seed (a restarted service), not of another seed', () => {
    const before = setup();
    const issued = generate(before.handlers, { email: 'restart@example.com' });
    const restarted = setup();
    const next = refreshOk(restarted.handlers, issued);
    expect(restarted.handlers.validate({ token: issued.advertising_token, email: 'restart@example.com' })).toEqual({
      http: 200,
      json: { status: 'success', body: true },
    });
    refreshOk(before.handlers, next);

    const other = setup('UID2', 'another seed');
    const refreshKeyId = deriveTokenKeys(SEED).refresh.id;
    expect(other.handlers.refresh(issued.refresh_token, true)).toEqual(
      clientError(`Invalid key: Generator of this token (Key ID: ${refreshKeyId}) does not exist.`),
    );
  });

  it('refreshes at exactly refresh_expires and is expired one millisecond later', () => {
    const { clock, handlers } = setup();
    const issued = generate(handlers, { email: 'edge@example.com' });
    clock.now = issued.refresh_expires;
    refreshOk(handlers, issued);
    clock.now = issued.refresh_expires + 1;
    expect(handlers.refresh(issued.refresh_token, true)).toEqual(EXPIRED);
  });
});

describe('refresh: optout', () => {
  it.each([
    ['refresh-optout@example.com', { email: 'refresh-optout@example.com' }],
    ['hash of refresh-optout@example.com', { email_hash: 'NaNI8RU0bL1Jpp1jJLC5aJO/lchc6gGhgXQIAwJ7cV4=' }],
    ['+00000000002', { phone: '+00000000002' }],
    ['hash of +00000000002', { phone_hash: '0VoxsIuk88qt7TnZaTC//C9Vur3pR1zBMIr1cJe7xjE=' }],
  ])('refresh-optout test identity %s: generate succeeds, refresh answers optout', (_name, request) => {
    const { handlers } = setup();
    const issued = generate(handlers, request);
    for (const authenticated of [true, false]) {
      expect(clientReads(handlers.refresh(issued.refresh_token, authenticated), issued.refresh_response_key)).toEqual({
        status: 'optout',
      });
    }
  });

  it('answers optout, under the presented key, once the user opted out after generate', () => {
    const { engine, handlers } = setup('EUID');
    const issued = generate(handlers, { email: 'leaver@example.com' });
    const next = refreshOk(handlers, issued);
    engine.optOut(sha256Base64('leaver@example.com'));
    const result = handlers.refresh(next.refresh_token, false);
    expect(clientReads(result, next.refresh_response_key)).toEqual({ status: 'optout' });
    // The engine is asked with the F stored in the token (no DII hash is available on refresh).
    const last = engine.optOutQueries.at(-1)!;
    expect(last).toEqual({
      type: 'email',
      hashB64: '',
      firstLevelHex: engine.firstLevelHash(sha256Base64('leaver@example.com')).toString('hex'),
    });
  });

  it('keeps refreshing the validate test identity although the registry lists it', () => {
    const { engine, handlers } = setup();
    const issued = generate(handlers, { phone: '+12345678901' });
    engine.optOut(sha256Base64('+12345678901'));
    refreshOk(handlers, issued);
  });

  it('answers optout for an identity established before 2021-03-08T17:00Z ("deprecated")', () => {
    const { clock, handlers } = setup();
    clock.now = Date.UTC(2021, 2, 8, 16, 59, 59, 999);
    const old = generate(handlers, { email: 'old@example.com' });
    expect(clientReads(handlers.refresh(old.refresh_token, true), old.refresh_response_key)).toEqual({
      status: 'optout',
    });
    clock.now = Date.UTC(2021, 2, 8, 17);
    const recent = generate(handlers, { email: 'old@example.com' });
    refreshOk(handlers, recent);
  });
});

describe('refresh: every failure row of the outcomes table', () => {
  const keys = deriveTokenKeys(SEED);

  it.each([true, false])('wrapper not base64 (authenticated %s)', (authenticated) => {
    const { handlers } = setup();
    const body = `${'A'.repeat(387)}!`;
    expect(handlers.refresh(body, authenticated)).toEqual(clientError('Invalid body: Body is not valid base64.'));
  });

  it.each([
    [12345, '12345'],
    [-1, '-1'],
  ])('wrapper key id %i unknown -> the id in the message', (keyId, shown) => {
    const { handlers } = setup();
    const issued = generate(handlers, { email: 'k@example.com' });
    const bytes = Buffer.from(issued.refresh_token, 'base64');
    bytes.writeInt32BE(keyId, 1);
    const expected = clientError(`Invalid key: Generator of this token (Key ID: ${shown}) does not exist.`);
    expect(handlers.refresh(bytes.toString('base64'), true)).toEqual(expected);
    expect(handlers.refresh(bytes.toString('base64'), false)).toEqual(expected);
  });

  it('wrapper GCM fails: altered bytes, or a known key that did not make it', () => {
    const { handlers } = setup();
    const issued = generate(handlers, { email: 'g@example.com' });
    const expected = clientError('Invalid data: Check encryption method and encryption key.');
    const altered = Buffer.from(issued.refresh_token, 'base64');
    altered[100] ^= 1;
    expect(handlers.refresh(altered.toString('base64'), true)).toEqual(expected);
    expect(handlers.refresh(altered.toString('base64'), false)).toEqual(expected);
    const otherKey = Buffer.from(issued.refresh_token, 'base64');
    otherKey.writeInt32BE(keys.master.id, 1);
    expect(handlers.refresh(otherKey.toString('base64'), true)).toEqual(expected);
  });

  it.each([
    ['not JSON', 'x'.repeat(258)],
    ['a JSON array', '[1,2,3]'],
    ['no refresh_token', JSON.stringify({ refresh_response_key: RESPONSE_KEY })],
    ['no refresh_response_key', JSON.stringify({ refresh_token: 'A'.repeat(168) })],
    ['a number as refresh_token', JSON.stringify({ refresh_response_key: RESPONSE_KEY, refresh_token: 5 })],
    ['a short refresh_response_key', JSON.stringify({ refresh_response_key: 'AAAA', refresh_token: 'A'.repeat(168) })],
  ])('wrapper JSON bad: %s', (_name, json) => {
    const { handlers } = setup();
    const expected = clientError('Invalid format: Payload is not valid json or missing required data.');
    expect(handlers.refresh(wrapperOf(json, keys.refresh), true)).toEqual(expected);
    expect(handlers.refresh(wrapperOf(json, keys.refresh), false)).toEqual(expected);
  });

  const innerCases: [string, (valid: string) => string][] = [
    ['empty', () => ''],
    ['not base64', () => '!'.repeat(168)],
    ['unknown version (V4 byte)', (valid) => patch(valid, (b) => (b[1] = 0x80))],
    ['legacy V2 byte0', (valid) => patch(valid, (b) => (b[0] = 0x02))],
    ['unknown key id', (valid) => patch(valid, (b) => b.writeInt32BE(424242, 2))],
    ['type byte disagrees with the payload', (valid) => patch(valid, (b) => (b[0] = b[0]! ^ 0b100))],
    ['too short', () => 'A3AAAA=='],
  ];

  function patch(token: string, change: (b: Buffer) => void): string {
    const bytes = Buffer.from(token, 'base64');
    change(bytes);
    return bytes.toString('base64');
  }

  it.each(innerCases)('inner token invalid: %s -> invalid_token when authenticated, error otherwise', (_name, make) => {
    const { handlers } = setup();
    const valid = innerTokenOf(generate(handlers, { email: 'i@example.com' }).refresh_token);
    const body = wrapperAround(make(valid));
    expect(handlers.refresh(body, true)).toEqual(INVALID);
    expect(handlers.refresh(body, false)).toEqual(HIDDEN);
  });

  it('inner token of the other scope (made with the same keys) is invalid', () => {
    const euid = setup('EUID');
    const uid2 = setup('UID2');
    const euidToken = generate(euid.handlers, { email: 'scope@example.com' }).refresh_token;
    expect(uid2.handlers.refresh(euidToken, true)).toEqual(INVALID);
    expect(uid2.handlers.refresh(euidToken, false)).toEqual(HIDDEN);
  });

  it('a valid untouched inner token in a hand-made wrapper still refreshes (the control for the rows above)', () => {
    const { handlers } = setup();
    const valid = innerTokenOf(generate(handlers, { email: 'i@example.com' }).refresh_token);
    const answer = clientReads(handlers.refresh(wrapperAround(valid), false), RESPONSE_KEY);
    expect(answer.status).toBe('success');
  });

  it('inner GCM failure with a known key -> 500 unknown', () => {
    const { handlers } = setup();
    const valid = innerTokenOf(generate(handlers, { email: 'i@example.com' }).refresh_token);
    const expected = { http: 500, json: { status: 'unknown', message: 'Unknown error while refreshing token v2' } };
    expect(handlers.refresh(wrapperAround(patch(valid, (b) => (b[50] = b[50]! ^ 1))), true)).toEqual(expected);
    expect(handlers.refresh(wrapperAround(patch(valid, (b) => b.writeInt32BE(keys.site.id, 2))), false)).toEqual(
      expected,
    );
  });

  it.each([true, false])('expired after refresh_expires (authenticated %s)', (authenticated) => {
    const { clock, handlers } = setup();
    const issued = generate(handlers, { phone: '+15555550100' });
    clock.advanceS(LIFETIMES.refreshExpiresS + 1);
    expect(handlers.refresh(issued.refresh_token, authenticated)).toEqual(authenticated ? EXPIRED : HIDDEN);
  });

  it('an expired token of an opted-out user is expired, not optout (expiry is checked first)', () => {
    const { engine, clock, handlers } = setup();
    const issued = generate(handlers, { email: 'late@example.com' });
    engine.optOut(sha256Base64('late@example.com'));
    clock.advanceS(LIFETIMES.refreshExpiresS + 1);
    expect(handlers.refresh(issued.refresh_token, true)).toEqual(EXPIRED);
  });

  it.each([
    ['empty body', () => ''],
    ['the bare 168-char inner token (a legacy length)', (wrapper: string) => innerTokenOf(wrapper)],
    ['the wrapper with a trailing newline', (wrapper: string) => `${wrapper}\n`],
  ])('a body that is not 388 chars (%s) is an invalid token', (_name, make) => {
    const { handlers } = setup();
    const body = make(generate(handlers, { email: 'len@example.com' }).refresh_token);
    expect(handlers.refresh(body, true)).toEqual(INVALID);
    expect(handlers.refresh(body, false)).toEqual(HIDDEN);
  });
});
