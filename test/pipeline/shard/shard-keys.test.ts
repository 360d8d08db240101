// --shard K/N over state entries: every key falls to exactly one runner, and the runners get even shares.
import { describe, expect, it } from 'vitest';
import { sha256Base64 } from '../../../src/identity/index.js';
import { ownsKey, runnerOfKey } from '../../../src/pipeline/shard/shard-keys.js';

const keys = Array.from({ length: 20_000 }, (_, i) => ({
  type: i % 4 === 0 ? 'phone' : 'email',
  hash: sha256Base64(`key-${i}`),
}));

describe('state entries shared out by a hash of the key', () => {
  it.each([1, 2, 3, 4, 7])(
    'N = %i: each key is owned by exactly one runner, and each runner owns about 1/N',
    (count) => {
      const owned = new Array<number>(count).fill(0);
      for (const { type, hash } of keys) {
        // K as the command line writes it, 0..count-1; the Shard's index counts from 1
        const owners = Array.from({ length: count }, (_, k) => k).filter((k) =>
          ownsKey({ index: k + 1, count }, type, hash),
        );
        expect(owners).toEqual([runnerOfKey(type, hash, count)]);
        owned[owners[0]]++;
      }
      for (const n of owned) expect(Math.abs(n - keys.length / count)).toBeLessThan((keys.length / count) * 0.06);
    },
  );

  it('the type is part of the key: one hash stored as an email and as a phone may fall to different runners', () => {
    const split = keys.filter(({ hash }) => runnerOfKey('email', hash, 4) !== runnerOfKey('phone', hash, 4));
    expect(split.length).toBeGreaterThan(keys.length / 2);
  });
});
