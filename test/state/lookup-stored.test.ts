import { afterAll, describe, expect, it, vi } from 'vitest';
import type { Database } from 'better-sqlite3';
import type { EntryUpdate } from '../../src/state/index.js';
import { prepared, SQL } from '../../src/state/queries.js';
import { STATUS_CODE } from '../../src/state/schema.js';
import { b64, tmpStates } from './tmp-state.js';
import { entriesByHash } from './lookups.js';

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
  it('gives, column by column and at each hash position, what the records hold', () => {
    const s = t.open(t.file(), { tailEntries: 50 });
    const all = updates(120);
    for (let i = 0; i < all.length; i += 20) s.commitBatch(all.slice(i, i + 20), 500);
    s.markBucketsRotated([{ bucketId: 'b7', lastUpdatedMs: 10_000_000 }]);
    for (const type of ['email', 'phone'] as const) {
      // stored hashes of this type, unknown ones, and stored hashes of the other type
      const asked = all.map((u) => u.hash).concat([b64('nope-1'), b64('nope-2')]);
      const byHash = entriesByHash(s, type, asked);
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

  it('reads odd strings and numbers as they were stored, in id runs and scattered ids alike', () => {
    const s = t.open(t.file(), { tailEntries: 50 });
    const odd: EntryUpdate[] = [
      // not base64, shorter than a key's 8 characters, outside the BMP, with a NUL, a comma in a bucket
      { type: 'email', hash: 'h1', outcome: { kind: 'mapped', u: 'u,1', p: 'p\u00e9', r: 1_000.5 } },
      { type: 'email', hash: 'h\u00e9llo-w\u00f6rld', outcome: { kind: 'mapped', u: 'x\u{1F600}y', p: null, r: -5 } },
      { type: 'phone', hash: b64('nul'), outcome: { kind: 'mapped', u: 'a\u0000b', p: '', r: 0 } },
      {
        type: 'email',
        hash: b64('bucket'),
        outcome: { kind: 'mapped', u: b64('ub'), p: null, r: null, bucketId: 'b,1' },
      },
      { type: 'email', hash: b64('big-r'), outcome: { kind: 'mapped', u: b64('ur'), p: null, r: 1e20 } },
    ];
    const plain = Array.from({ length: 60 }, (_, i): EntryUpdate => {
      const hash = b64(`run${i}`);
      return { type: 'email', hash, outcome: { kind: 'mapped', u: b64(`u${i}`), p: null, r: 2_000 + i } };
    });
    s.commitBatch(plain.slice(0, 30), 500);
    s.commitBatch(odd, 500);
    s.commitBatch(plain.slice(30), 500);
    for (const type of ['email', 'phone'] as const) {
      // a long run of consecutive ids, single ids among them, repeats and unknown hashes
      const asked = [...plain.map((u) => u.hash), ...odd.map((u) => u.hash), plain[3].hash, 'h2', b64('none')];
      for (const subset of [asked, asked.filter((_, i) => i % 3 === 0)]) {
        const byHash = entriesByHash(s, type, subset);
        const stored = s.lookupStored(type, subset);
        const found = new Set<string>();
        for (let k = 0; k < stored.at.length; k++) {
          const hash = subset[stored.at[k]];
          found.add(hash);
          const entry = byHash.get(hash);
          expect(entry, hash).toBeDefined();
          expect({
            u: stored.u[k],
            p: stored.p[k],
            r: Number.isNaN(stored.r[k]) ? null : stored.r[k],
            bucketId: stored.bucketId[k],
          }).toEqual({ u: entry?.u, p: entry?.p, r: entry?.r, bucketId: entry?.bucketId });
        }
        expect([...found].sort()).toEqual([...byHash.keys()].sort());
      }
    }
    // the odd ones come back exactly
    const back = s.lookupStored('email', ['h\u00e9llo-w\u00f6rld', 'h1']);
    expect(back.u[back.at.indexOf(0)]).toBe('x\u{1F600}y');
    expect(back.p[back.at.indexOf(1)]).toBe('p\u00e9');
    expect(back.r[back.at.indexOf(1)]).toBe(1_000.5);
    const nul = s.lookupStored('phone', [b64('nul')]);
    expect([nul.u[0], nul.p[0]]).toEqual(['a\u0000b', '']);
  });

  it('reads entries joined, and row by row only a blob whose records do not add up', () => {
    const s = t.open(t.file(), { tailEntries: 50 });
    // text values (one with a character of two bytes), an empty one, a REAL r and a v2 bucket, among the usual
    const all: EntryUpdate[] = [
      ...updates(40),
      { type: 'email', hash: 'plain-text', outcome: { kind: 'mapped', u: 'u,1', p: '', r: 7.5, bucketId: 'b,1' } },
      { type: 'email', hash: b64('odd'), outcome: { kind: 'mapped', u: 'caf\u00e9', p: null, r: 1 } },
    ];
    s.commitBatch(all, 500);
    // the statements of the store's connection, as the record walker reads them
    const db = (s as unknown as { db: Database }).db;
    const statement = (sql: string) => prepared(db, sql);
    const rowByRow = [
      vi.spyOn(statement(SQL.recordRangeRows), 'all'),
      vi.spyOn(statement(SQL.listedRecordRows), 'all'),
    ];
    const hashes = all.filter((u) => u.type === 'email').map((u) => u.hash);
    const stored = s.lookupStored('email', hashes);
    expect(stored.at.length).toBe(hashes.length);
    for (const spy of rowByRow) expect(spy).not.toHaveBeenCalled();
    const answer = (hash: string) => {
      const i = stored.at.indexOf(hashes.indexOf(hash));
      return [stored.u[i], stored.p[i], stored.r[i], stored.bucketId[i]];
    };
    expect(answer('plain-text')).toEqual(['u,1', '', 7.5, 'b,1']);
    expect(answer(b64('odd'))).toEqual(['caf\u00e9', null, 1, null]);
    // a joined blob with a byte too many is read again row by row, with the same answers
    const spoil = (sql: string): void => {
      const stmt = statement(sql);
      const get = stmt.get.bind(stmt);
      vi.spyOn(stmt, 'get').mockImplementation((...params: unknown[]) => {
        const row = get(...params) as unknown[];
        const bytes = row.at(-1) as Buffer | null;
        return bytes === null ? row : [...row.slice(0, -1), Buffer.concat([bytes, Buffer.of(0)])];
      });
    };
    spoil(SQL.listedRecords);
    spoil(SQL.recordRange);
    const again = s.lookupStored('email', hashes);
    expect(rowByRow.some((spy) => spy.mock.calls.length > 0)).toBe(true);
    expect(again).toEqual(stored);
  });

  it('reads the entries of a batch asked again as their id range, each request answered once', () => {
    const s = t.open(t.file(), { tailEntries: 300 });
    const all = updates(1_200);
    for (let i = 0; i < all.length; i += 100) s.commitBatch(all.slice(i, i + 100), 500);
    const keys = (s as unknown as { keys: { idsOf: (keys: number[]) => number[] } }).keys;
    const idsOfKeys = vi.spyOn(keys, 'idsOf');
    for (const type of ['email', 'phone'] as const) {
      // two batches' worth in their order (merged ones and the tail's), a few far ones, unknown ones, a repeat
      const near = all.slice(150, 1_050).filter((u) => u.type === type);
      const asked = [...near.map((u) => u.hash).reverse(), all[3].hash, all[1_150].hash, b64('nope'), near[5].hash];
      idsOfKeys.mockClear();
      const stored = s.lookupStored(type, asked);
      // the sample, then the requests the range left: far fewer than were asked
      const looked = idsOfKeys.mock.calls.reduce((sum, [keys]) => sum + keys.length, 0);
      expect(looked).toBeLessThan(asked.length / 2);
      const byHash = entriesByHash(s, type, asked);
      const answered = [...stored.at].map((i) => asked[i]);
      expect(new Set(answered).size).toBe(answered.length);
      expect(answered.sort()).toEqual([...byHash.keys()].sort());
      for (let k = 0; k < stored.at.length; k++) {
        const entry = byHash.get(asked[stored.at[k]]);
        expect([stored.u[k], stored.p[k], stored.bucketId[k]]).toEqual([entry?.u, entry?.p, entry?.bucketId]);
        expect(Number.isNaN(stored.r[k]) ? null : stored.r[k]).toBe(entry?.r);
      }
    }
  });

  it('answers from key blocks kept in memory as from the file, through merges and folds by any connection', () => {
    const file = t.file();
    const writer = t.open(file, { tailEntries: 40 });
    // a reader that keeps every block it reads, and one that keeps none
    const keeping = t.open(file, { readonly: true, keyCacheMiB: 64 });
    const all = updates(1_500);
    const answersOf = (s: ReturnType<typeof t.open>, type: 'email' | 'phone', asked: string[]): string[] => {
      const stored = s.lookupStored(type, asked);
      return [...stored.at].map((i, k) => `${asked[i]} ${stored.u[k]} ${stored.status[k]}`).sort();
    };
    for (let i = 0; i < all.length; i += 100) {
      writer.commitBatch(all.slice(i, i + 100), 500);
      const asked = all.slice(0, i + 100).map((u) => u.hash);
      for (const type of ['email', 'phone'] as const) {
        const fresh = t.open(file, { readonly: true, keyCacheMiB: 0 });
        const expected = answersOf(fresh, type, asked);
        fresh.close();
        expect(expected.length).toBe(all.slice(0, i + 100).filter((u) => u.type === type).length);
        // the writer merged and folded since the keeping reader last looked: its blocks are read again
        expect(answersOf(keeping, type, asked)).toEqual(expected);
        expect(answersOf(writer, type, asked)).toEqual(expected);
      }
    }
  });

  it('finds nothing in an empty file or for no hashes', () => {
    const s = t.open(t.file());
    expect(s.lookupStored('email', [b64('x')]).at.length).toBe(0);
    expect(s.lookupStored('email', []).at.length).toBe(0);
  });
});
