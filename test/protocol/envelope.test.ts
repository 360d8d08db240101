import { describe, expect, it } from 'vitest';
import {
  EnvelopeError,
  decodeBody,
  decodeKey,
  decodeStrictBase64,
  decryptRefreshResponse,
  decryptRequest,
  decryptResponse,
  encodeBody,
  encryptRefreshResponse,
  encryptRequest,
  encryptResponse,
} from '../../src/protocol/index.js';
import * as V from './vectors.js';

const key = decodeKey(V.SECRET);
const iv = Buffer.from(V.IV_HEX, 'hex');
const nonce = Buffer.from(V.NONCE_HEX, 'hex');

describe('request envelope', () => {
  it.each(V.REQUEST_VECTORS)('matches the published vector for %s', (json, expected) => {
    const { envelope } = encryptRequest(key, json, { nowMs: V.TIMESTAMP, nonce, iv });
    // the published phone vector is unpadded base64; compare bytes
    expect(envelope.equals(Buffer.from(expected, 'base64'))).toBe(true);
    expect(encodeBody(envelope, 'text')).toBe(Buffer.from(expected, 'base64').toString('base64'));
  });

  it('round-trips through the service side with timestamp and nonce', () => {
    const { envelope, nonce: n } = encryptRequest(key, '{"email_hash":["x"]}', { nowMs: 1_700_000_000_123 });
    const opened = decryptRequest(key, envelope);
    expect(opened.timestampMs).toBe(1_700_000_000_123);
    expect(opened.nonce.equals(n)).toBe(true);
    expect(opened.json.toString()).toBe('{"email_hash":["x"]}');
  });

  it('uses a fresh IV and nonce on every call', () => {
    const a = encryptRequest(key, '{}');
    const b = encryptRequest(key, '{}');
    expect(a.nonce.equals(b.nonce)).toBe(false);
    expect(a.envelope.subarray(1, 13).equals(b.envelope.subarray(1, 13))).toBe(false);
  });

  it('rejects short bodies, a wrong version byte and a wrong key, in that order', () => {
    const { envelope } = encryptRequest(key, '{}');
    expect(() => decryptRequest(key, envelope.subarray(0, 44))).toThrow(/too short/);
    const bad = Buffer.from(envelope);
    bad[0] = 2;
    expect(() => decryptRequest(decodeKey(V.OPTOUT_REFRESH_KEY), bad)).toThrow(/received 2, must be 1/);
    try {
      decryptRequest(decodeKey(V.OPTOUT_REFRESH_KEY), envelope);
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(EnvelopeError);
      expect((e as EnvelopeError).code).toBe('decrypt-failed');
    }
  });
});

describe('response envelope', () => {
  it('decrypts the published generate response and checks the echoed nonce', () => {
    const data = Buffer.from(V.GENERATE_RESPONSE, 'base64');
    expect(data.length).toBe(999);
    const opened = decryptResponse(key, data, nonce);
    expect(opened.timestampMs).toBe(V.GENERATE_RESPONSE_TIMESTAMP);
    const json = JSON.parse(opened.json.toString()) as {
      status: string;
      body: { refresh_response_key: string; advertising_token: string };
    };
    expect(json.status).toBe('success');
    expect(json.body.refresh_response_key).toBe(V.GENERATE_RESPONSE_REFRESH_KEY);
    expect(json.body.advertising_token.startsWith('AgAAAAN6')).toBe(true);
  });

  it('refuses an answer with another nonce', () => {
    const data = Buffer.from(V.GENERATE_RESPONSE, 'base64');
    expect(() => decryptResponse(key, data, Buffer.alloc(8))).toThrow(/nonce/);
  });

  it('round-trips a response', () => {
    const enc = encryptResponse(key, nonce, '{"status":"success","body":true}', { nowMs: 42 });
    const opened = decryptResponse(key, enc, nonce);
    expect(opened.timestampMs).toBe(42);
    expect(opened.json.toString()).toBe('{"status":"success","body":true}');
  });
});

describe('refresh response', () => {
  it('decrypts the published opt-out refresh answer (bare JSON, no timestamp or nonce)', () => {
    const plain = decryptRefreshResponse(
      decodeKey(V.OPTOUT_REFRESH_KEY),
      Buffer.from(V.OPTOUT_REFRESH_RESPONSE, 'base64'),
    );
    expect(plain.toString()).toBe('{"status":"optout"}');
  });

  it('decrypts the published refresh success answer with the key issued with the token', () => {
    const plain = decryptRefreshResponse(
      decodeKey(V.GENERATE_RESPONSE_REFRESH_KEY),
      Buffer.from(V.REFRESH_RESPONSE, 'base64'),
    );
    const json = JSON.parse(plain.toString()) as {
      status: string;
      body: { refresh_response_key: string; identity_expires: number };
    };
    expect(json.status).toBe('success');
    expect(json.body.refresh_response_key).toBe('3df27Us3KXIy4LhebjNt0DDfF0N5zGXEQ1MmJ7jIU8o=');
    expect(json.body.identity_expires).toBe(1668065878329);
  });

  it('fails with an older key', () => {
    expect(() =>
      decryptRefreshResponse(decodeKey(V.OPTOUT_REFRESH_KEY), Buffer.from(V.REFRESH_RESPONSE, 'base64')),
    ).toThrow(EnvelopeError);
  });

  it('round-trips', () => {
    const k = decodeKey(V.OPTOUT_REFRESH_KEY);
    expect(decryptRefreshResponse(k, encryptRefreshResponse(k, '{"a":1}')).toString()).toBe('{"a":1}');
  });
});

describe('keys and bodies', () => {
  it('refuses a malformed secret without showing it', () => {
    try {
      decodeKey('not-a-secret-value');
      expect.unreachable();
    } catch (e) {
      expect((e as Error).message).not.toContain('not-a-secret-value');
      expect((e as Error).message).toMatch(/32 bytes/);
    }
  });

  it('reads strict base64 only', () => {
    expect(decodeStrictBase64('QUJD')?.toString()).toBe('ABC');
    expect(decodeStrictBase64('QUI')?.toString()).toBe('AB');
    expect(decodeStrictBase64('QU JD')).toBeNull();
    expect(decodeStrictBase64('QUJD\n')).toBeNull();
    expect(decodeStrictBase64('QU-_')).toBeNull();
  });

  it('decodes a body in the mode its content type declares', () => {
    const raw = Buffer.from([1, 2, 3, 250]);
    expect(decodeBody(raw, 'application/octet-stream').equals(raw)).toBe(true);
    expect(decodeBody(Buffer.from(raw.toString('base64')), 'text/plain').equals(raw)).toBe(true);
    expect(() => decodeBody(Buffer.from('{"status":"x"}'), 'text/plain')).toThrow();
  });
});

describe('strict base64 on large bodies', () => {
  it('decodes a 40 MB body without running out of stack', () => {
    const raw = Buffer.alloc(30_000_001, 7);
    const decoded = decodeStrictBase64(raw.toString('base64'));
    expect(decoded?.length).toBe(raw.length);
  });
  it.each(['Q===', 'QUJD=', 'QUJDRA=', 'Q', '=QUJD', 'QU=JD'])('rejects malformed padding %j', (s) => {
    expect(decodeStrictBase64(s)).toBeNull();
  });
  it.each([
    ['QUJDRA==', 'ABCD'],
    ['QUJDREU=', 'ABCDE'],
    ['QUJDREU', 'ABCDE'],
    ['', ''],
  ])('accepts %j', (s, out) => {
    expect(decodeStrictBase64(s)?.toString()).toBe(out);
  });
});
