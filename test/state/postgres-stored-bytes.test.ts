import { hash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  bytesOfText,
  decodeCanonical,
  entryKeyOf,
  HASH_BYTES,
  hashOfKey,
  RAW_UID_BYTES,
  rawUidBytes,
  rawUidText,
  sentOf,
  textOfBytes,
  textOfSent,
} from '../../src/state/postgres/stored-bytes.js';

const sha = (s: string): string => hash('sha256', s, 'base64');

describe('PostgreSQL state: hashes and raw UIDs as bytes', () => {
  it('decodes canonical base64 of 32 and 33 bytes as a Buffer does, and refuses any other text', () => {
    for (let i = 0; i < 200; i++) {
      for (const width of [HASH_BYTES, RAW_UID_BYTES]) {
        const bytes = Buffer.from(hash('sha512', `b${i}`)).subarray(0, width);
        const out = Buffer.alloc(width + 2);
        expect(decodeCanonical(bytes.toString('base64'), width, out, 1)).toBe(true);
        expect(out.subarray(1, 1 + width)).toEqual(bytes);
      }
    }
    const h = sha('x');
    const u = Buffer.alloc(RAW_UID_BYTES, 9).toString('base64');
    const out = Buffer.alloc(64);
    // a last digit whose dropped bits are set, no padding, a character outside the alphabet, one beyond ASCII
    for (const text of [`${h.slice(0, 42)}B=`, `${h.slice(0, 43)}A`, `-${h.slice(1)}`, `é${h.slice(1)}`, h.slice(1)])
      expect(decodeCanonical(text, HASH_BYTES, out, 0)).toBe(false);
    for (const text of [`${u.slice(0, 43)}=`, `${u.slice(0, 43)}_`, h])
      expect(decodeCanonical(text, RAW_UID_BYTES, out, 0)).toBe(false);
    expect(decodeCanonical(h, 16, out, 0)).toBe(false);
  });

  it('keeps a hash and a raw UID of the usual size as the bytes they stand for', () => {
    const h = sha('a@example.com');
    const key = entryKeyOf(1, h);
    expect(key.length).toBe(1 + HASH_BYTES);
    expect(key[0]).toBe(1);
    expect(key.subarray(1)).toEqual(Buffer.from(h, 'base64'));
    expect(hashOfKey(key)).toBe(h);
    const u = Buffer.alloc(RAW_UID_BYTES, 7).toString('base64');
    expect(rawUidBytes(u)?.length).toBe(RAW_UID_BYTES);
    expect(rawUidText(rawUidBytes(u))).toBe(u);
    expect(rawUidBytes(null)).toBeNull();
    expect(rawUidText(null)).toBeNull();
  });

  it('reads back any other text as it was, and never as the bytes of another text', () => {
    const h = sha('x');
    const texts = new Set([
      '',
      'h1',
      'old',
      'é€😀',
      // base64, but not canonical (the last character carries bits that decoding drops) or not of the usual size
      `${h.slice(0, 42)}B=`,
      Buffer.alloc(HASH_BYTES - 1, 9).toString('base64'),
      Buffer.alloc(HASH_BYTES + 3, 9).toString('base64'),
      // as many UTF-8 bytes as the usual size, less one and more one
      'x'.repeat(HASH_BYTES - 1),
      'x'.repeat(HASH_BYTES),
      'x'.repeat(HASH_BYTES + 1),
      'x'.repeat(RAW_UID_BYTES + 1),
      // 44 characters of the base64 alphabet that are not a canonical 32 or 33 bytes
      `${h.slice(0, 43)}A`,
      `${h.slice(0, 42)}=A`,
      `${h.slice(0, 43)}.`,
      Buffer.alloc(RAW_UID_BYTES, 9).toString('base64'),
      h,
    ]);
    for (const width of [HASH_BYTES, RAW_UID_BYTES]) {
      const seen = new Map<string, string>();
      for (const text of texts) {
        const bytes = bytesOfText(text, width);
        expect(textOfBytes(bytes, width)).toBe(text);
        const hex = bytes.toString('hex');
        expect(seen.get(hex)).toBeUndefined();
        seen.set(hex, text);
        // the decoded bytes exactly when the text is canonical base64 of `width` bytes
        const decoded = Buffer.from(text, 'base64');
        const usual = text.length > 0 && decoded.length === width && decoded.toString('base64') === text;
        expect(bytes.length === width).toBe(usual);
        // as sent and read as base64: the same bytes, the same text back
        expect(Buffer.from(sentOf(text, width), 'base64')).toEqual(bytes);
        expect(textOfSent(sentOf(text, width), width)).toBe(text);
        expect(textOfSent(bytes.toString('base64').replace(/(.{8})/g, '$1\n'), width)).toBe(text);
      }
    }
    for (const text of texts) expect(hashOfKey(entryKeyOf(0, text))).toBe(text);
  });
});
