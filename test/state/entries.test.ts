import { afterAll, describe, expect, it } from 'vitest';
import Database from '../helpers/sqlite-driver.js';
import type { EntryUpdate } from '../../src/state/index.js';
import { entryRowsAt } from './records.js';
import { b64, tmpStates } from './tmp-state.js';
import { countsOf, lookupHashes, lookupMany } from './lookups.js';

const t = tmpStates();
afterAll(() => t.cleanup());

const H = b64('hash-1');
const U1 = b64('raw-1');
const U2 = b64('raw-2');

function only(store: ReturnType<typeof t.open>, type: 'email' | 'phone', hash: string) {
  const found = lookupMany(store, [{ type, hash }]);
  return found.get(`${type}:${hash}`);
}

describe('commitBatch', () => {
  it('inserts a mapped entry with its raw UIDs, refresh time and mapped times', () => {
    const s = t.open(t.file());
    s.commitBatch([{ type: 'email', hash: H, outcome: { kind: 'mapped', u: U1, p: null, r: 5_000 } }], 1_000);
    expect(only(s, 'email', H)).toEqual({
      id: expect.any(Number),
      type: 'email',
      hash: H,
      status: 'mapped',
      u: U1,
      p: null,
      r: 5_000,
      bucketId: null,
      lastMappedS: 1_000,
      lastOptoutCheckS: null,
      optedOutSinceMs: null,
      due: false,
    });
  });

  it('updates in place on a remap: same id, last mapped and r moved', () => {
    const s = t.open(t.file());
    s.commitBatch([{ type: 'email', hash: H, outcome: { kind: 'mapped', u: U1, p: null, r: 5_000 } }], 1_000);
    const before = only(s, 'email', H)!;
    s.commitBatch([{ type: 'email', hash: H, outcome: { kind: 'mapped', u: U2, p: U1, r: 9_000 } }], 6_000);
    const after = only(s, 'email', H)!;
    expect(after).toMatchObject({ id: before.id, u: U2, p: U1, r: 9_000, lastMappedS: 6_000 });
    expect(countsOf(s).entries).toBe(1);
  });

  it('keeps the same hash of the two DII types apart', () => {
    const s = t.open(t.file());
    s.commitBatch(
      [
        { type: 'email', hash: H, outcome: { kind: 'mapped', u: U1, p: null, r: 5_000 } },
        { type: 'phone', hash: H, outcome: { kind: 'invalid' } },
      ],
      1_000,
    );
    expect(only(s, 'email', H)?.status).toBe('mapped');
    expect(only(s, 'phone', H)?.status).toBe('invalid');
    expect(countsOf(s)).toEqual({ entries: 2, mapped: 1, optout: 0, invalid: 1 });
  });

  it('turns an opted-out entry into a tombstone: hash and times kept, every raw UID gone', () => {
    const s = t.open(t.file());
    s.commitBatch([{ type: 'phone', hash: H, outcome: { kind: 'mapped', u: U1, p: U2, r: 5_000 } }], 1_000);
    s.recordOptoutChecks([only(s, 'phone', H)!.id], 1_500);
    s.commitBatch([{ type: 'phone', hash: H, outcome: { kind: 'optout' } }], 6_000);
    expect(only(s, 'phone', H)).toMatchObject({
      hash: H,
      status: 'optout',
      u: null,
      p: null,
      r: null,
      bucketId: null,
      lastMappedS: 1_000,
      lastOptoutCheckS: 1_500,
      optedOutSinceMs: null,
      due: false,
    });
    // nothing left for remap-due or the opt-out sweep
    expect(s.countDue(10_000)).toBe(0);
    expect(s.countWithRawUid()).toBe(0);
  });

  it('keeps a known opt-out time unless a new one is given', () => {
    const s = t.open(t.file());
    s.commitBatch([{ type: 'email', hash: H, outcome: { kind: 'optout', optedOutSinceMs: 123_000 } }], 1_000);
    expect(only(s, 'email', H)?.optedOutSinceMs).toBe(123_000);
    s.commitBatch([{ type: 'email', hash: H, outcome: { kind: 'optout' } }], 2_000);
    expect(only(s, 'email', H)?.optedOutSinceMs).toBe(123_000);
    s.commitBatch([{ type: 'email', hash: H, outcome: { kind: 'optout', optedOutSinceMs: 456_000 } }], 3_000);
    expect(only(s, 'email', H)?.optedOutSinceMs).toBe(456_000);
    // a first answer that is an opt-out was never mapped
    expect(only(s, 'email', H)?.lastMappedS).toBeNull();
  });

  it('marks invalid: raw UIDs and bucket cleared', () => {
    const s = t.open(t.file(), { api: 'v2' });
    s.commitBatch(
      [{ type: 'email', hash: H, outcome: { kind: 'mapped', u: U1, p: null, r: null, bucketId: 'b1' } }],
      1_000,
    );
    s.commitBatch([{ type: 'email', hash: H, outcome: { kind: 'invalid' } }], 2_000);
    expect(only(s, 'email', H)).toMatchObject({ status: 'invalid', u: null, p: null, r: null, bucketId: null });
  });

  it('maps a tombstone again when the service maps it again (opted back in)', () => {
    const s = t.open(t.file());
    s.commitBatch([{ type: 'email', hash: H, outcome: { kind: 'optout', optedOutSinceMs: 5 } }], 1_000);
    s.commitBatch([{ type: 'email', hash: H, outcome: { kind: 'mapped', u: U1, p: null, r: 9_000 } }], 2_000);
    expect(only(s, 'email', H)).toMatchObject({ status: 'mapped', u: U1, optedOutSinceMs: null, lastMappedS: 2_000 });
  });

  it('writes a batch all or nothing', () => {
    const s = t.open(t.file());
    const bad = [
      { type: 'email', hash: b64('ok-1'), outcome: { kind: 'mapped', u: U1, p: null, r: 5 } },
      // a NOT NULL hash: SQLite refuses the row, and with it the whole batch
      { type: 'email', hash: null, outcome: { kind: 'invalid' } },
    ] as unknown as EntryUpdate[];
    expect(() => s.commitBatch(bad, 1)).toThrow();
    expect(countsOf(s).entries).toBe(0);
  });

  it('has no value that could hold a raw email or phone: hashes, raw UIDs, times and codes only', () => {
    const path = t.file();
    const s = t.open(path);
    s.commitBatch(
      [
        { type: 'email', hash: H, outcome: { kind: 'mapped', u: U1, p: U2, r: 5_000, bucketId: 'b1' } },
        { type: 'phone', hash: b64('hash-2'), outcome: { kind: 'optout', optedOutSinceMs: 7_000 } },
        { type: 'email', hash: b64('hash-3'), outcome: { kind: 'invalid' } },
      ],
      1_000,
    );
    const raw = new Database(path, { readonly: true });
    try {
      const columns = (raw.prepare('PRAGMA table_info(entries)').all() as { name: string; type: string }[]).map(
        (c) => `${c.name}:${c.type}`,
      );
      expect(columns).toEqual(['id:INTEGER', 'record:BLOB']);
    } finally {
      raw.close();
    }
    // every hash and raw UID is the bytes of a base64 text (here 32 each); the only text is the service's bucket id
    const entries = entryRowsAt(path);
    expect(entries).toHaveLength(3);
    for (const e of entries) {
      expect(Buffer.isBuffer(e.hash) && e.hash.length === 32).toBe(true);
      for (const uid of [e.u, e.p]) expect(uid === null || (Buffer.isBuffer(uid) && uid.length === 32)).toBe(true);
    }
    expect(entries.map((e) => e.bucketId)).toEqual(['b1', null, null]);
    expect(entries.map((e) => [e.status, e.r, e.lastMappedS, e.optedOutSinceMs])).toEqual([
      [1, 5_000, 1_000, null],
      [2, null, null, 7_000],
      [3, null, null, null],
    ]);
  });
});

describe('lookupMany and lookupHashes', () => {
  it('answers 5,000 keys at once, stored and missing mixed, keyed type:hash', () => {
    const s = t.open(t.file());
    const updates: EntryUpdate[] = [];
    for (let i = 0; i < 7_000; i++) {
      updates.push({
        type: i % 2 === 0 ? 'email' : 'phone',
        hash: b64(`k${i}`),
        outcome: { kind: 'mapped', u: b64(`u${i}`), p: null, r: 10_000 + i },
      });
    }
    s.commitBatch(updates, 1_000);

    const keys: { type: 'email' | 'phone'; hash: string }[] = [];
    for (let i = 0; i < 5_000; i++) {
      if (i % 3 === 0) keys.push({ type: 'email', hash: b64(`missing${i}`) });
      else if (i % 3 === 1) keys.push({ type: i % 2 === 0 ? 'email' : 'phone', hash: b64(`k${i}`) });
      // stored, but under the other DII type: not a match
      else keys.push({ type: i % 2 === 0 ? 'phone' : 'email', hash: b64(`k${i}`) });
    }
    const found = lookupMany(s, keys);
    let expected = 0;
    keys.forEach((k, i) => {
      const e = found.get(`${k.type}:${k.hash}`);
      if (i % 3 !== 1) {
        expect(e, `key ${i}`).toBeUndefined();
        return;
      }
      expected++;
      expect(e).toMatchObject({ type: k.type, hash: k.hash, status: 'mapped', u: b64(`u${i}`), r: 10_000 + i });
    });
    expect(found.size).toBe(expected);
  });

  it('handles every length around the prepared list sizes, duplicates included', () => {
    const s = t.open(t.file());
    const updates: EntryUpdate[] = [];
    for (let i = 0; i < 6_000; i++) updates.push({ type: 'email', hash: b64(`h${i}`), outcome: { kind: 'invalid' } });
    s.commitBatch(updates, 1);
    for (const n of [0, 1, 15, 16, 17, 128, 129, 1_025, 4_999, 5_000, 5_001, 6_000]) {
      const hashes = Array.from({ length: n }, (_, i) => b64(`h${i}`));
      expect(lookupHashes(s, 'email', hashes).size, `n=${n}`).toBe(n);
      expect(lookupHashes(s, 'phone', hashes).size).toBe(0);
    }
    const dup = [b64('h1'), b64('h1'), b64('nope'), b64('h2')];
    const m = lookupHashes(s, 'email', dup);
    expect([...m.keys()].sort()).toEqual([b64('h1'), b64('h2')].sort());
  });
});
