import { afterAll, describe, expect, it } from 'vitest';
import type { EntryUpdate } from '../../src/state/index.js';
import { keyOf, keyOfBytes } from '../../src/state/lookup-key.js';
import { b64, tailOf, tmpStates } from './tmp-state.js';
import { lookupHashes } from './lookups.js';

const t = tmpStates();
afterAll(() => t.cleanup());

const mapped = (type: 'email' | 'phone', hash: string, i: number): EntryUpdate => ({
  type,
  hash,
  outcome: { kind: 'mapped', u: b64(`u${i}`), p: null, r: 10_000 + i },
});

describe('keyOfBytes', () => {
  it('is keyOf of a base64 hash, read from the bytes it stands for anywhere in a buffer', () => {
    for (let i = 0; i < 50; i++) {
      const hash = b64(`k${i}`);
      const bytes = Buffer.concat([Buffer.from([9, 9]), Buffer.from(hash, 'base64')]);
      expect(keyOfBytes(i % 2, bytes, 2)).toBe(keyOf(i % 2, hash));
    }
  });
});

describe('the tail read again on open', () => {
  it('finds every entry a run appended, whatever its hash, after the file is opened again', () => {
    const path = t.file();
    const first = t.open(path);
    const odd = ['abc', 'not base64 at all', 'naïve-hash-01234', '😀😀😀😀😀😀😀😀😀'];
    const all: EntryUpdate[] = [];
    for (let i = 0; i < 2_000; i++) all.push(mapped(i % 2 ? 'phone' : 'email', b64(`t${i}`), i));
    for (const [i, hash] of odd.entries()) all.splice(300 * (i + 1), 0, mapped('email', hash, 5_000 + i));
    for (let i = 0; i < all.length; i += 500) first.commitBatch(all.slice(i, i + 500), 1_000);
    first.close();

    const again = t.open(path);
    for (const type of ['email', 'phone'] as const) {
      const hashes = all.filter((u) => u.type === type).map((u) => u.hash);
      const found = lookupHashes(again, type, hashes);
      expect(found.size).toBe(hashes.length);
      for (const u of all.filter((x) => x.type === type))
        expect(found.get(u.hash)?.u).toBe((u.outcome as { u: string }).u);
    }
    expect(tailOf(again.path)).toBe(all.length);
  });
});
