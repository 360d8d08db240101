import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { storedOf } from '../../src/state/entry-record.js';

/** The text a record gives back for a stored value (entry-record.ts EntryView.text reads bytes as base64). */
const textOfStored = (v: Buffer | string | null): string | null => (Buffer.isBuffer(v) ? v.toString('base64') : v);

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
