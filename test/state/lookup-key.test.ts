import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { keyOf } from '../../src/state/lookup-key.js';

/** The key as the file format defines it: the first 6 bytes of the hash's bytes, less their last 2 bits, and the type. */
function byBytes(type: number, hash: string): number {
  const b = /^[A-Za-z0-9+/]{8}/.test(hash)
    ? Buffer.from(hash.slice(0, 8), 'base64')
    : createHash('sha256').update(hash).digest();
  return (b[0] * 2 ** 38 + b[1] * 2 ** 30 + b[2] * 2 ** 22 + b[3] * 2 ** 14 + b[4] * 2 ** 6 + (b[5] >>> 2)) * 2 + type;
}

describe('keyOf', () => {
  it('gives the key of the stored format for base64 hashes and for any other string', () => {
    const hashes = Array.from({ length: 2_000 }, (_, i) => createHash('sha256').update(`k${i}`).digest('base64'));
    const odd = ['', 'abc', 'abcdefg', 'abcd-fgh', 'abcd_fgh', 'abcdéfgh', '////////', '++++++++', 'AAAAAAAA', 'é'];
    for (const h of [...hashes, ...odd]) {
      for (const type of [0, 1]) expect(keyOf(type, h), h).toBe(byBytes(type, h));
    }
    expect(keyOf('phone', hashes[0])).toBe(byBytes(1, hashes[0]));
    expect(keyOf(0, '////////')).toBe(2 ** 47 - 2);
  });
});
