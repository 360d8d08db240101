import { afterAll, describe, expect, it } from 'vitest';
import type { EntryUpdate } from '../../src/state/index.js';
import { STATUS_CODE } from '../../src/state/schema.js';
import { b64, tmpStates } from './tmp-state.js';

const t = tmpStates();
afterAll(() => t.cleanup());

/** Entries of every kind, half merged into the keys tables (tailEntries 50) and half in the tail. */
function updates(n: number): EntryUpdate[] {
  return Array.from({ length: n }, (_, i): EntryUpdate => {
    const type = i % 3 === 0 ? 'phone' : 'email';
    const hash = b64(`h${i}`);
    if (i % 7 === 0) return { type, hash, outcome: { kind: 'optout' } };
    if (i % 11 === 0) return { type, hash, outcome: { kind: 'invalid' } };
    if (i % 13 === 0)
      return { type, hash, outcome: { kind: 'mapped', u: b64(`u${i}`), p: null, r: null, bucketId: 'b7' } };
    return { type, hash, outcome: { kind: 'mapped', u: b64(`u${i}`), p: i % 2 ? b64(`p${i}`) : null, r: 1_000 + i } };
  });
}

describe('lookupStored', () => {
  it('gives, column by column and at each hash position, what lookupHashes gives', () => {
    const s = t.open(t.file(), { tailEntries: 50 });
    const all = updates(120);
    for (let i = 0; i < all.length; i += 20) s.commitBatch(all.slice(i, i + 20), 500);
    s.markBucketsRotated([{ bucketId: 'b7', lastUpdatedMs: 10_000_000 }]);
    for (const type of ['email', 'phone'] as const) {
      // stored hashes of this type, unknown ones, and stored hashes of the other type
      const asked = all.map((u) => u.hash).concat([b64('nope-1'), b64('nope-2')]);
      const byHash = s.lookupHashes(type, asked);
      const stored = s.lookupStored(type, asked);
      expect(stored.at.length).toBe(byHash.size);
      expect(byHash.size).toBe(all.filter((u) => u.type === type).length);
      for (let k = 0; k < stored.at.length; k++) {
        const entry = byHash.get(asked[stored.at[k]]);
        expect(entry).toBeDefined();
        if (entry === undefined) continue;
        expect({
          status: stored.status[k],
          u: stored.u[k],
          p: stored.p[k],
          r: Number.isNaN(stored.r[k]) ? null : stored.r[k],
          bucketId: stored.bucketId[k],
          due: stored.due[k] === 1,
        }).toEqual({
          status: STATUS_CODE[entry.status],
          u: entry.u,
          p: entry.p,
          r: entry.r,
          bucketId: entry.bucketId,
          due: entry.due,
        });
      }
    }
  });

  it('finds nothing in an empty file or for no hashes', () => {
    const s = t.open(t.file());
    expect(s.lookupStored('email', [b64('x')]).at.length).toBe(0);
    expect(s.lookupStored('email', []).at.length).toBe(0);
  });
});
