import { afterAll, describe, expect, it } from 'vitest';
import type { DiiType } from '../../src/identity/index.js';
import type { EntryUpdate } from '../../src/state/index.js';
import type { KeyLevel } from '../../src/state/key-levels.js';
import { entryRowsAt } from './records.js';
import { b64, levelPairsOf, tailOf, tmpStates } from './tmp-state.js';
import { countsOf, lookupHashes, lookupMany } from './lookups.js';

const t = tmpStates('uid2-layout-');
afterAll(() => t.cleanup());

const mapped = (label: string, r: number, type: 'email' | 'phone' = 'email'): EntryUpdate => ({
  type,
  hash: b64(label),
  outcome: { kind: 'mapped', u: b64(`u-${label}`), p: null, r },
});

function keysRows(path: string, level: KeyLevel = 'key_blocks'): number {
  return levelPairsOf(path, level).length;
}

describe('the tail of recent entries and its merge into the key levels', () => {
  it('finds entries before and after each merge, and merges once the tail reaches tailEntries', () => {
    const path = t.file();
    const s = t.open(path, { tailEntries: 1_000 });
    for (let b = 0; b < 5; b++) {
      s.commitBatch(
        Array.from({ length: 450 }, (_, i) => mapped(`e${b}-${i}`, 1_000 + i)),
        10 + b,
      );
      const all = Array.from({ length: (b + 1) * 450 }, (_, i) => ({
        type: 'email' as const,
        hash: b64(`e${Math.floor(i / 450)}-${i % 450}`),
      }));
      expect(lookupMany(s, all).size, `after batch ${b}`).toBe(all.length);
    }
    // 450, 900, then 1,350 >= 1,000: merged; 450, then 900: still in the tail
    expect(keysRows(path)).toBe(1_350);
    expect(tailOf(s.path)).toBe(900);
  });

  it('merges into the recent level, and folds it into the main one once it holds a quarter as many', () => {
    const path = t.file();
    const s = t.open(path, { tailEntries: 50 });
    const batch = (from: number, n: number) => Array.from({ length: n }, (_, i) => mapped(`f${from + i}`, 9));
    const all = (n: number) => Array.from({ length: n }, (_, i) => ({ type: 'email' as const, hash: b64(`f${i}`) }));
    s.commitBatch(batch(0, 400), 1);
    expect([keysRows(path), keysRows(path, 'key_blocks_recent')]).toEqual([400, 0]);
    s.commitBatch(batch(400, 60), 1);
    expect([keysRows(path), keysRows(path, 'key_blocks_recent')]).toEqual([400, 60]);
    s.commitBatch(batch(460, 20), 1);
    // tail of 20 < 50: in memory only; the three places answer together
    expect(tailOf(s.path)).toBe(20);
    expect(lookupMany(s, all(480)).size).toBe(480);
    s.commitBatch(batch(480, 40), 1);
    expect([keysRows(path), keysRows(path, 'key_blocks_recent')]).toEqual([520, 0]);
    expect(lookupMany(s, all(520)).size).toBe(520);
    expect(lookupMany(s, [{ type: 'email', hash: b64('f999') }]).size).toBe(0);
  });

  it('sees entries another connection appended (a second store on the same file)', () => {
    const path = t.file();
    const a = t.open(path, { tailEntries: 100 });
    const b = t.open(path, { tailEntries: 100 });
    a.commitBatch([mapped('x', 5)], 1);
    expect(lookupHashes(b, 'email', [b64('x')]).get(b64('x'))?.u).toBe(b64('u-x'));
    // b appends and merges what a wrote too; a still finds everything
    b.commitBatch(
      Array.from({ length: 150 }, (_, i) => mapped(`y${i}`, 5)),
      2,
    );
    expect(keysRows(path)).toBe(151);
    a.commitBatch([mapped('x', 6)], 3);
    expect(
      lookupMany(a, [
        { type: 'email', hash: b64('x') },
        { type: 'email', hash: b64('y149') },
      ]).size,
    ).toBe(2);
    expect(countsOf(a).entries).toBe(151);
    expect(lookupHashes(b, 'email', [b64('x')]).get(b64('x'))?.r).toBe(6);
  });

  it('tells apart hashes that share a lookup key (same first bytes) and the two DII types', () => {
    const s = t.open(t.file(), { tailEntries: 3 });
    const twin = (last: number) => Buffer.concat([Buffer.alloc(6, 7), Buffer.alloc(26, last)]).toString('base64');
    const updates: EntryUpdate[] = [];
    for (let i = 0; i < 4; i++)
      updates.push({ type: 'email', hash: twin(i), outcome: { kind: 'mapped', u: b64(`t${i}`), p: null, r: i } });
    updates.push({ type: 'phone', hash: twin(0), outcome: { kind: 'invalid' } });
    s.commitBatch(updates, 1);
    // merged (tail of 5 >= 3), then one more in the tail
    s.commitBatch([{ type: 'email', hash: twin(9), outcome: { kind: 'optout' } }], 2);
    const keys: { type: DiiType; hash: string }[] = [0, 1, 2, 3, 9, 5].map((i) => ({ type: 'email', hash: twin(i) }));
    const found = lookupMany(s, [...keys, { type: 'phone', hash: twin(0) }]);
    expect([...found.keys()].sort()).toEqual(
      [...[0, 1, 2, 3, 9].map((i) => `email:${twin(i)}`), `phone:${twin(0)}`].sort(),
    );
    for (let i = 0; i < 4; i++) expect(found.get(`email:${twin(i)}`)?.u).toBe(b64(`t${i}`));
    expect(found.get(`phone:${twin(0)}`)?.status).toBe('invalid');
  });

  it('keeps any string as it was given: hashes and raw UIDs that are not base64 come back the same', () => {
    const s = t.open(t.file(), { tailEntries: 2 });
    const odd = ['b0-1', 'abcd', 'ABC=', 'not base64 at all', 'QUJD', '00000000', 'YQ==', 'YR==', '', 'é'];
    s.commitBatch(
      odd.map((h, i) => ({
        type: 'email',
        hash: h,
        outcome: { kind: 'mapped', u: odd[(i + 1) % odd.length], p: odd[i], r: 9 },
      })),
      1,
    );
    const found = lookupHashes(s, 'email', odd);
    expect(found.size).toBe(odd.length);
    for (const [i, h] of odd.entries())
      expect(found.get(h), h).toMatchObject({ hash: h, u: odd[(i + 1) % odd.length], p: odd[i] });
  });

  it('keeps base64 hashes and raw UIDs as their bytes, any other text as text', () => {
    const path = t.file();
    const s = t.open(path);
    const rawUid = Buffer.alloc(33, 0xff).toString('base64');
    s.commitBatch(
      [
        { type: 'email', hash: b64('bytes'), outcome: { kind: 'mapped', u: rawUid, p: b64('prev'), r: 9 } },
        { type: 'email', hash: 'not base64', outcome: { kind: 'mapped', u: 'odd uid', p: null, r: 9 } },
      ],
      1,
    );
    s.close();
    const form = (v: Uint8Array | string | null) =>
      v === null ? null : typeof v === 'string' ? ['text', v.length] : ['bytes', v.length];
    expect(entryRowsAt(path).map((e) => [form(e.hash), form(e.u), form(e.p)])).toEqual([
      [
        ['bytes', 32],
        ['bytes', 33],
        ['bytes', 32],
      ],
      [['text', 10], ['text', 7], null],
    ]);
    const again = t.open(path);
    expect(lookupHashes(again, 'email', [b64('bytes')]).get(b64('bytes'))).toMatchObject({ u: rawUid, p: b64('prev') });
    expect(again.lookupStored('email', ['not base64']).u).toEqual(['odd uid']);
  });

  it('applies a key named twice in one batch in batch order, whatever the r order of the batch', () => {
    const s = t.open(t.file());
    const h = b64('twice');
    s.commitBatch(
      [
        { type: 'email', hash: h, outcome: { kind: 'optout', optedOutSinceMs: 5 } },
        mapped('other', 1),
        { type: 'email', hash: h, outcome: { kind: 'mapped', u: b64('late'), p: null, r: 2 } },
      ],
      7,
    );
    expect(lookupHashes(s, 'email', [h]).get(h)).toMatchObject({
      status: 'mapped',
      u: b64('late'),
      r: 2,
      optedOutSinceMs: null,
    });
    expect(countsOf(s).entries).toBe(2);
  });

  it('rolls the tail back with a failed batch: the next batch appends and finds as if it never happened', () => {
    const s = t.open(t.file(), { tailEntries: 1_000 });
    const bad = [
      mapped('ok', 1),
      { type: 'email', hash: b64('bad'), outcome: { kind: 'nonsense' } },
    ] as unknown as EntryUpdate[];
    expect(() => s.commitBatch(bad, 1)).toThrow(/unknown outcome/);
    expect(tailOf(s.path)).toBe(0);
    s.commitBatch([mapped('ok', 2)], 2);
    expect(lookupHashes(s, 'email', [b64('ok')]).get(b64('ok'))).toMatchObject({ id: 1, r: 2 });
  });
});
