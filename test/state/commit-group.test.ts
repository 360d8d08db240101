import { afterAll, describe, expect, it } from 'vitest';
import type { EntryUpdate } from '../../src/state/index.js';
import { b64, tmpStates } from './tmp-state.js';
import { countsOf, lookupHashes } from './lookups.js';

const t = tmpStates();
afterAll(() => t.cleanup());

function batch(from: number, n: number): EntryUpdate[] {
  return Array.from({ length: n }, (_, i) => ({
    type: 'email' as const,
    hash: b64(`g${from + i}`),
    outcome: { kind: 'mapped' as const, u: b64(`gu${from + i}`), p: null, r: 9_000 + i },
  }));
}

const hashes = (updates: EntryUpdate[]) => updates.map((u) => u.hash);

describe('a group of commits', () => {
  it('is in the file only once it ends, and its own lookups see it before', () => {
    const path = t.file();
    const writer = t.open(path);
    const reader = t.open(path, { readonly: true });
    const a = batch(0, 300);
    const b = batch(300, 300);
    writer.beginGroup();
    writer.commitBatch(a, 1_000);
    writer.commitBatch(b, 1_000);
    expect(lookupHashes(writer, 'email', hashes(b)).size).toBe(300);
    expect(lookupHashes(reader, 'email', hashes(a)).size).toBe(0);
    writer.endGroup();
    expect(lookupHashes(reader, 'email', [...hashes(a), ...hashes(b)]).size).toBe(600);
    expect(countsOf(reader).entries).toBe(600);
  });

  it('rolled back leaves nothing, in the file or in the lookups of its store, and commits go on after', () => {
    const path = t.file();
    const writer = t.open(path);
    writer.commitBatch(batch(0, 100), 1_000);
    writer.beginGroup();
    writer.commitBatch(batch(100, 200), 1_000);
    writer.abortGroup();
    expect(lookupHashes(writer, 'email', hashes(batch(100, 200))).size).toBe(0);
    expect(countsOf(writer).entries).toBe(100);
    writer.commitBatch(batch(100, 200), 1_000);
    const again = t.open(path, { readonly: true });
    expect(lookupHashes(again, 'email', hashes(batch(0, 300))).size).toBe(300);
  });

  it('keeps the batches before a malformed one, which fails alone', () => {
    const path = t.file();
    const writer = t.open(path);
    writer.beginGroup();
    writer.commitBatch(batch(0, 50), 1_000);
    const bad = [{ type: 'email', hash: b64('x'), outcome: { kind: 'nonsense' } }] as unknown as EntryUpdate[];
    expect(() => writer.commitBatch(bad, 1_000)).toThrow();
    writer.commitBatch(batch(50, 50), 1_000);
    writer.endGroup();
    expect(countsOf(t.open(path, { readonly: true })).entries).toBe(100);
  });

  it('cannot be opened twice', () => {
    const writer = t.open(t.file());
    writer.beginGroup();
    expect(() => writer.beginGroup()).toThrow(/already open/);
    writer.endGroup();
  });
});
