import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { StoredBytes, isBase64Of, storedOf, textOfStored } from '../../src/state/stored-bytes.js';

describe('stored bytes of a hash or raw UID', () => {
  const hash = createHash('sha256').update('a@example.com').digest('base64');
  const rawUid = Buffer.alloc(33, 7).toString('base64');

  it('keeps canonical base64 as its bytes and gives the same text back', () => {
    const h = storedOf(hash);
    const u = storedOf(rawUid);
    expect(Buffer.isBuffer(h) && h.length).toBe(32);
    expect(Buffer.isBuffer(u) && u.length).toBe(33);
    expect(textOfStored(h)).toBe(hash);
    expect(textOfStored(u)).toBe(rawUid);
  });

  it('keeps any other text as it is', () => {
    // not base64, a non-zero unused bit, missing padding, characters outside the alphabet, empty
    const others = ['not a hash', `${hash.slice(0, 42)}B=`, hash.slice(0, 43), `${hash.slice(0, 40)}-_ab`, ''];
    for (const text of others) {
      expect(storedOf(text)).toBe(text);
      expect(textOfStored(storedOf(text))).toBe(text);
    }
  });

  it('reads null as null', () => {
    expect(textOfStored(null)).toBeNull();
  });
});

describe('isBase64Of', () => {
  it('is true exactly for the base64 of the bytes, at any offset and length', () => {
    const bytes = Buffer.from(Array.from({ length: 40 }, (_, i) => (i * 73 + 11) & 255));
    for (let start = 0; start < 4; start++) {
      for (let length = 0; length <= 35; length++) {
        const text = bytes.toString('base64', start, start + length);
        expect(isBase64Of(text, bytes, start, length), `${start}+${length}`).toBe(true);
        if (length > 0) {
          // one digit changed, one byte more or fewer
          const changed = `${text[0] === 'A' ? 'B' : 'A'}${text.slice(1)}`;
          expect(isBase64Of(changed, bytes, start, length)).toBe(false);
          expect(isBase64Of(text, bytes, start, length - 1)).toBe(false);
          expect(isBase64Of(text, bytes, start + 1, length)).toBe(false);
        }
      }
    }
  });
});

describe('StoredBytes', () => {
  it('gives the bytes of every length of base64, each value kept intact as the buffer fills and is replaced', () => {
    const arena = new StoredBytes(10);
    const values: [Buffer, Buffer | string][] = [];
    for (let length = 1; length <= 40; length++) {
      const bytes = Buffer.from(Array.from({ length }, (_, i) => (i * 97 + length) & 255));
      values.push([bytes, arena.of(bytes.toString('base64'))]);
    }
    for (const [bytes, stored] of values) expect(stored).toEqual(bytes);
    expect(storedOf(Buffer.from([1, 2, 3, 4]).toString('base64'))).toEqual(Buffer.from([1, 2, 3, 4]));
  });
});
