import { describe, expect, it } from 'vitest';
import { NetworkError } from '../../src/client/index.js';
import {
  TEST_IDENTITIES,
  classifyFailure,
  parseIdentity,
  prepareTokenInput,
  refreshTiming,
} from '../../src/pipeline/tokens/tokens.js';
import { ClientError, ClockSkewError, ServerError, UnauthorizedError } from '../../src/protocol/index.js';

describe('TEST_IDENTITIES', () => {
  it('carries the published test-identity hashes, phones as the operator maps them', () => {
    expect(TEST_IDENTITIES.map((t) => [t.value, t.outcome, t.hash])).toEqual([
      ['optout@example.com', 'optout', 'DYsnJ8r5+cjRDHue98gIGDKvLIMuqAm/RRLODrjqK50='],
      ['+00000000000', 'optout', '313yQvZOTb0vjjEU7sTO/UWxGPzVppIbCyQEJEnfxLo='],
      ['refresh-optout@example.com', 'refresh-optout', 'NaNI8RU0bL1Jpp1jJLC5aJO/lchc6gGhgXQIAwJ7cV4='],
      ['+00000000002', 'refresh-optout', '0VoxsIuk88qt7TnZaTC//C9Vur3pR1zBMIr1cJe7xjE='],
      ['validate@example.com', 'validate', 'ntI244ZRTXwAwpki6/M5cyBYW7h/Wq576lnN3l9+W/c='],
      ['+12345678901', 'validate', 'EObwtHBUqDNZR33LNSMdtt5cafsYFuGmuY4ZLenlue4='],
    ]);
  });
});

describe('prepareTokenInput', () => {
  it('sends the docs example as the published hash, and refuses without the value', () => {
    expect(prepareTokenInput('email', 'USER@example.com')).toMatchObject({
      ok: true,
      input: { email_hash: 'tMmiiTI7IaAcPpQPFQ65uMVCWH8av9jw4cwf/F5HVRQ=' },
    });
    expect(prepareTokenInput('phone', '+12345678901 ')).toEqual({
      ok: false,
      reason: expect.stringContaining('E.164'),
    });
  });
});

describe('parseIdentity', () => {
  const id = {
    advertising_token: 'a',
    refresh_token: 'r',
    identity_expires: 3,
    refresh_from: 1,
    refresh_expires: 5,
    refresh_response_key: 'k',
  };
  it('reads the printed identity and a whole success answer', () => {
    expect(parseIdentity(JSON.stringify(id))).toEqual({ ok: true, identity: id });
    expect(parseIdentity(JSON.stringify({ status: 'success', body: id }))).toEqual({ ok: true, identity: id });
  });
  it('names missing or mistyped fields, never values', () => {
    const r = parseIdentity(JSON.stringify({ ...id, refresh_from: '1', refresh_response_key: undefined }));
    expect(r).toEqual({ ok: false, problem: expect.stringContaining('refresh_response_key, refresh_from') });
    expect(parseIdentity('{"status":"optout"}')).toEqual({ ok: false, problem: expect.stringContaining('optout') });
    expect(parseIdentity('not json')).toEqual({ ok: false, problem: expect.stringContaining('not JSON') });
  });
});

describe('refreshTiming', () => {
  const input = { refreshToken: 't', refreshResponseKey: 'k', refreshFrom: 1000, refreshExpires: 5000 };
  it('early, due, expired, unknown', () => {
    expect(refreshTiming(input, 400)).toEqual({ kind: 'early', inMs: 600 });
    expect(refreshTiming(input, 1000)).toEqual({ kind: 'due' });
    expect(refreshTiming(input, 5000)).toEqual({ kind: 'expired', agoMs: 0 });
    expect(refreshTiming({ refreshToken: 't', refreshResponseKey: 'k' }, 400)).toEqual({ kind: 'unknown' });
  });
});

describe('classifyFailure', () => {
  it('tells the wrong secret from other 400s, and 401, skew, 5xx and network apart', () => {
    expect(
      classifyFailure(new ClientError(400, 'client_error', 'Invalid body: Check encryption key (ClientSecret). See …'))
        .kind,
    ).toBe('wrong_secret');
    expect(classifyFailure(new ClientError(400, 'client_error', 'Invalid Identifier')).kind).toBe('client_error');
    expect(
      classifyFailure(
        new ClockSkewError(400, 'client_error', 'Invalid timestamp: Request too old or client time drift.'),
      ).kind,
    ).toBe('clock_skew');
    expect(classifyFailure(new UnauthorizedError(401, 'unauthorized', undefined)).kind).toBe('unauthorized');
    expect(classifyFailure(new ServerError(503, 'server_error', undefined)).kind).toBe('server');
    expect(classifyFailure(new NetworkError('http://x', 'refused', 'ECONNREFUSED')).kind).toBe('network');
  });
});
