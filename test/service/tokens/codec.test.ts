import { describe, expect, it } from 'vitest';
import { sha256Base64 } from '../../../src/identity/index.js';
import { decodeKey } from '../../../src/protocol/index.js';
import {
  INNER_REFRESH_TOKEN_LENGTH,
  LOCAL_OPERATOR,
  LOCAL_PUBLISHER,
  REFRESH_WRAPPER_LENGTH,
  createTokenHandlers,
  decodeAdvertisingToken,
  decodeRefreshToken,
  deriveTokenKeys,
  encodeAdvertisingToken,
  unwrapRefreshToken,
  wrapRefreshToken,
} from '../../../src/service/tokens/index.js';
import type { IdentityScope } from '../../../src/service/contracts.js';
import { FakeClock, FakeEngine, LIFETIMES, SEED, START_MS } from './fakes.js';

function generateBody(scope: IdentityScope, request: Record<string, string>) {
  const engine = new FakeEngine(scope);
  const handlers = createTokenHandlers({ engine, clock: new FakeClock(START_MS), lifetimes: LIFETIMES, seed: SEED });
  const result = handlers.generate(request);
  expect(result.http).toBe(200);
  const body = (result.json as { body: Record<string, string | number> }).body;
  return { engine, body: body as { advertising_token: string; refresh_token: string; refresh_response_key: string } };
}

describe('token formats', () => {
  const cases: [IdentityScope, Record<string, string>, string, string][] = [
    ['UID2', { email: 'user@example.com' }, 'A4', 'AA'],
    ['UID2', { phone: '+15555550100' }, 'B4', 'AA'],
    ['EUID', { email: 'user@example.com' }, 'E4', 'EA'],
    ['EUID', { phone: '+15555550100' }, 'F4', 'EA'],
  ];

  it.each(cases)(
    '%s %j: advertising token %s…, 218 chars; refresh token %s…, 388 chars',
    (scope, request, adPrefix, refreshPrefix) => {
      const { body } = generateBody(scope, request);
      expect(body.advertising_token.slice(0, 2)).toBe(adPrefix);
      expect(body.advertising_token).toHaveLength(218);
      expect(body.advertising_token).toMatch(/^[A-Za-z0-9_-]+$/);
      expect(body.refresh_token.slice(0, 2)).toBe(refreshPrefix);
      expect(body.refresh_token).toHaveLength(REFRESH_WRAPPER_LENGTH);
      expect(body.refresh_token).toMatch(/^[A-Za-z0-9+/]+$/);
      expect(decodeKey(body.refresh_response_key, 'refresh_response_key')).toHaveLength(32);
    },
  );

  it('wraps a 168-char inner V3 refresh token and the response key in the 388-char wrapper', () => {
    const { body } = generateBody('UID2', { email: 'user@example.com' });
    const keys = deriveTokenKeys(SEED);
    const opened = unwrapRefreshToken(keys, body.refresh_token);
    if (!opened.ok) throw new Error(`unwrap failed: ${opened.failure}`);
    expect(opened.innerToken).toHaveLength(INNER_REFRESH_TOKEN_LENGTH);
    expect(Buffer.from(opened.innerToken, 'base64')).toHaveLength(124);
    expect(opened.responseKey.toString('base64')).toBe(body.refresh_response_key);
    const wrapperBytes = Buffer.from(body.refresh_token, 'base64');
    expect(wrapperBytes).toHaveLength(291);
    expect(wrapperBytes.readInt32BE(1)).toBe(keys.refresh.id);
  });

  it('puts F, the type and the scope in the refresh token', () => {
    const { engine, body } = generateBody('EUID', { phone: '+15555550100' });
    const keys = deriveTokenKeys(SEED);
    const opened = unwrapRefreshToken(keys, body.refresh_token);
    if (!opened.ok) throw new Error('unwrap failed');
    const decoded = decodeRefreshToken(keys, opened.innerToken);
    if (!decoded.ok) throw new Error('decode failed');
    expect(decoded.token.scope).toBe('EUID');
    expect(decoded.token.type).toBe('phone');
    expect(decoded.token.firstLevel.equals(engine.firstLevelHash(sha256Base64('+15555550100')))).toBe(true);
    expect(decoded.token.expiresMs).toBe(START_MS + LIFETIMES.refreshExpiresS * 1000);
    expect(decoded.token.establishedMs).toBe(START_MS);
    expect(decoded.token.publisher).toEqual(LOCAL_PUBLISHER);
    expect(decoded.token.operator).toEqual(LOCAL_OPERATOR);
  });

  it('round-trips every field of an advertising token, with a 33-byte raw UID giving 219 chars', () => {
    const keys = deriveTokenKeys(SEED);
    const content = {
      scope: 'UID2' as const,
      type: 'phone' as const,
      expiresMs: START_MS + 1,
      createdMs: START_MS + 2,
      operator: { siteId: 7, type: 1, version: 3, keyId: 11 },
      publisher: { siteId: 123, publisherId: 2 ** 40 + 5, clientKeyId: 77 },
      privacyBits: 5,
      establishedMs: START_MS - 1000,
      refreshedMs: START_MS + 3,
      rawUid: Buffer.alloc(33, 0xab),
    };
    const text = encodeAdvertisingToken(keys, content);
    expect(text).toHaveLength(219);
    const decoded = decodeAdvertisingToken(keys, text);
    expect(decoded).toEqual({ ok: true, token: content });
  });

  it('refuses advertising tokens it cannot read', () => {
    const keys = deriveTokenKeys(SEED);
    const { body } = generateBody('UID2', { email: 'user@example.com' });
    const token = body.advertising_token;
    expect(decodeAdvertisingToken(keys, token).ok).toBe(true);
    expect(decodeAdvertisingToken(keys, '')).toEqual({ ok: false, reason: 'malformed' });
    expect(decodeAdvertisingToken(keys, token.replace(/.$/, '+'))).toEqual({ ok: false, reason: 'malformed' });
    expect(decodeAdvertisingToken(deriveTokenKeys('another seed'), token)).toEqual({
      ok: false,
      reason: 'foreign-key',
    });
    const bytes = Buffer.from(token, 'base64url');
    bytes[40] ^= 1;
    expect(decodeAdvertisingToken(keys, bytes.toString('base64url'))).toEqual({ ok: false, reason: 'decrypt-failed' });
    // The identity byte is not authenticated, so its shape is checked: only scope bit 4, type bit 2 and 0b11.
    for (const byte0 of [0x0b, 0x23, 0x43, 0x02]) {
      const patched = Buffer.from(token, 'base64url');
      patched[0] = byte0;
      expect(decodeAdvertisingToken(keys, patched.toString('base64url'))).toEqual({ ok: false, reason: 'malformed' });
    }
  });

  it('derives the same keys from the same seed and different ones from another seed', () => {
    const a = deriveTokenKeys(SEED);
    const b = deriveTokenKeys(SEED);
    const c = deriveTokenKeys('another seed');
    for (const which of ['master', 'site', 'refresh'] as const) {
      expect(b[which].id).toBe(a[which].id);
      expect(b[which].secret.equals(a[which].secret)).toBe(true);
      expect(c[which].secret.equals(a[which].secret)).toBe(false);
      expect(a[which].secret).toHaveLength(32);
    }
    expect(new Set([a.master.id, a.site.id, a.refresh.id]).size).toBe(3);
    expect(a.byId(a.site.id)).toBe(a.site);
    expect(a.byId(c.refresh.id)).toBeUndefined();
  });

  it('refuses to issue a wrapper that is not 388 characters', () => {
    const keys = deriveTokenKeys(SEED);
    expect(() => wrapRefreshToken(keys, 'UID2', 'A'.repeat(INNER_REFRESH_TOKEN_LENGTH + 1), Buffer.alloc(32))).toThrow(
      /388/,
    );
    expect(wrapRefreshToken(keys, 'UID2', 'A'.repeat(INNER_REFRESH_TOKEN_LENGTH), Buffer.alloc(32))).toHaveLength(388);
  });
});
