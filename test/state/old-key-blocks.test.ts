// A state file whose key blocks are in format 1 (what schema 5 wrote): this version finds its entries and merges.
import { afterAll, describe, expect, it } from 'vitest';
import type { EntryUpdate } from '../../src/state/index.js';
import { type KeyLevel, levelBlocks } from '../../src/state/key-levels.js';
import Database from '../helpers/sqlite-driver.js';
import { encodeV1Block } from './key-blocks-v1.js';
import { b64, levelPairsOf, tmpStates } from './tmp-state.js';

const t = tmpStates();
afterAll(() => t.cleanup());

const LEVELS: KeyLevel[] = ['key_blocks', 'key_blocks_recent'];

function mapped(from: number, to: number): EntryUpdate[] {
  return Array.from({ length: to - from }, (_, j): EntryUpdate => {
    const i = from + j;
    return {
      type: i % 3 === 0 ? 'phone' : 'email',
      hash: b64(`h${i}`),
      outcome: { kind: 'mapped', u: b64(`u${i}`), p: null, r: 1_000 + i },
    };
  });
}

/** Writes every block of the file's levels again in format 1, the same pairs under the same first keys. */
function toFormat1(path: string): void {
  const db = new Database(path);
  try {
    for (const level of LEVELS) {
      const blocks = [...levelBlocks(db, level)].map((b) => ({
        first: b.first,
        keys: Array.from({ length: b.count }, (_, i) => b.key(i)),
        ids: Array.from({ length: b.count }, (_, i) => b.id(i)),
      }));
      const put = db.prepare(`UPDATE ${level} SET keys = ? WHERE first_k = ?`);
      db.transaction(() => {
        for (const b of blocks) put.run(encodeV1Block(b.keys, b.ids), b.first);
      })();
    }
  } finally {
    db.close();
  }
}

/** The number of blocks of the file's levels in format 1 and in format 2. */
function formats(path: string): [number, number] {
  const db = new Database(path, { readonly: true });
  try {
    const firstBytes = LEVELS.flatMap(
      (level) => db.prepare(`SELECT hex(substr(keys, 1, 1)) FROM ${level}`).pluck().all() as string[],
    ).map((h) => Number.parseInt(h, 16));
    const v1 = firstBytes.filter((b) => b <= 6).length;
    return [v1, firstBytes.length - v1];
  } finally {
    db.close();
  }
}

/** The entries of `updates` found with their raw UID by a store opened on the file; none of `unknown` found. */
function found(path: string, updates: EntryUpdate[], unknown: string[]): number {
  const s = t.open(path, { tailEntries: 50 });
  let n = 0;
  for (const type of ['email', 'phone'] as const) {
    const asked = updates.filter((u) => u.type === type);
    const byHash = s.lookupHashes(type, [...asked.map((u) => u.hash), ...unknown]);
    for (const h of unknown) expect(byHash.has(h)).toBe(false);
    for (const u of asked) if (u.outcome.kind === 'mapped' && byHash.get(u.hash)?.u === u.outcome.u) n++;
  }
  s.close();
  return n;
}

describe('a state file with format 1 key blocks', () => {
  it('is looked up and written to as it is, the blocks its merges reach written in format 2', () => {
    const path = t.file();
    const first = mapped(0, 900);
    const s = t.open(path, { tailEntries: 50 });
    for (let i = 0; i < first.length; i += 50) s.commitBatch(first.slice(i, i + 50), 500);
    s.close();
    const pairs = levelPairsOf(path).length + levelPairsOf(path, 'key_blocks_recent').length;
    expect(pairs).toBeGreaterThan(800);
    toFormat1(path);
    expect(formats(path)[1]).toBe(0);
    expect(formats(path)[0]).toBeGreaterThan(2);
    const unknown = [b64('nope-1'), b64('nope-2'), b64('nope-3')];
    expect(found(path, first, unknown)).toBe(first.length);
    // more entries: merges and folds rewrite what they reach, every entry is still found
    const more = mapped(900, 1_400);
    const w = t.open(path, { tailEntries: 50 });
    for (let i = 0; i < more.length; i += 50) w.commitBatch(more.slice(i, i + 50), 600);
    w.close();
    expect(formats(path)[1]).toBeGreaterThan(0);
    expect(found(path, [...first, ...more], unknown)).toBe(first.length + more.length);
  });
});
