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
      // a hash is 32 bytes; a raw UID 33, or 32 in the older format
      for (const [width, size] of [
        [HASH_BYTES, 32],
        [RAW_UID_BYTES, 33],
        [RAW_UID_BYTES, 32],
      ]) {
        const bytes = Buffer.from(hash('sha512', `b${i}`)).subarray(0, size);
        const out = Buffer.alloc(size + 2);
        expect(decodeCanonical(bytes.toString('base64'), width, out, 1)).toBe(size);
        expect(out.subarray(1, 1 + size)).toEqual(bytes);
      }
    }
    const h = sha('x');
    const u = Buffer.alloc(RAW_UID_BYTES, 9).toString('base64');
    const out = Buffer.alloc(64);
    // a last digit whose dropped bits are set, no padding, a character outside the alphabet, one beyond ASCII
    for (const text of [`${h.slice(0, 42)}B=`, `${h.slice(0, 43)}A`, `-${h.slice(1)}`, `é${h.slice(1)}`, h.slice(1)])
      expect(decodeCanonical(text, HASH_BYTES, out, 0)).toBe(0);
    // a hash is never 33 bytes
    expect(decodeCanonical(u, HASH_BYTES, out, 0)).toBe(0);
    for (const text of [`${u.slice(0, 42)}B=`, `${u.slice(0, 43)}_`, `-${u.slice(1)}`, u.slice(1)])
      expect(decodeCanonical(text, RAW_UID_BYTES, out, 0)).toBe(0);
    expect(decodeCanonical(h, 16, out, 0)).toBe(0);
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
    // the older format's raw UID (what the local service sends) is kept as its 32 bytes too, not as its text
    const u32 = sha('raw');
    expect(rawUidBytes(u32)).toEqual(Buffer.from(u32, 'base64'));
    expect(rawUidText(rawUidBytes(u32))).toBe(u32);
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
      // as many UTF-8 bytes as a usual size, less one and more one
      'x'.repeat(HASH_BYTES - 2),
      'x'.repeat(HASH_BYTES - 1),
      'x'.repeat(HASH_BYTES),
      'x'.repeat(HASH_BYTES + 1),
      'x'.repeat(RAW_UID_BYTES + 1),
      `${'x'.repeat(HASH_BYTES - 2)}é`,
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
        // the decoded bytes exactly when the text is canonical base64 of a usual size: a hash's 32 bytes, a raw
        // UID's 33 or 32
        const decoded = Buffer.from(text, 'base64');
        const sizes = width === HASH_BYTES ? [32] : [32, 33];
        const usual = text.length > 0 && sizes.includes(decoded.length) && decoded.toString('base64') === text;
        expect(sizes.includes(bytes.length)).toBe(usual);
        if (usual) expect(bytes).toEqual(decoded);
        // as sent and read as base64: the same bytes, the same text back
        expect(Buffer.from(sentOf(text, width), 'base64')).toEqual(bytes);
        expect(textOfSent(sentOf(text, width), width)).toBe(text);
        expect(textOfSent(bytes.toString('base64').replace(/(.{8})/g, '$1\n'), width)).toBe(text);
      }
    }
    for (const text of texts) expect(hashOfKey(entryKeyOf(0, text))).toBe(text);
  });
});
