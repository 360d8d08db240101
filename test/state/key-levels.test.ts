// Levels of key blocks: what a merge leaves, what a lookup finds, against a plain sorted model, old blocks too.
import { describe, expect, it } from 'vitest';
import { BLOCK_BYTES, type KeyBlock } from '../../src/state/key-blocks.js';
import { type KeyLevel, arrayPairs, levelBlocks, levelPairs, mergeIntoLevel } from '../../src/state/key-levels.js';
import { BlockBudget, LevelReader } from '../../src/state/level-reader.js';
import { KEY_BLOCK_TABLES } from '../../src/state/schema.js';
import Database from '../helpers/sqlite-driver.js';
import { type Pair, byKeyThenId, pairsIn, random } from './pairs.js';

/** n pairs with keys spread over 47 bits, some keys shared by two ids, ids from `firstId` on. */
function pairs(n: number, firstId: number, next: () => number): Pair[] {
  const out: Pair[] = [];
  for (let i = 0; i < n; i++) {
    const key = Math.floor(next() * 2 ** 47);
    out.push([key, firstId + i]);
    if (i % 97 === 0 && i + 1 < n) out.push([key, firstId + ++i]);
  }
  return out.sort(byKeyThenId);
}

function open(): InstanceType<typeof Database> {
  const db = new Database(':memory:');
  db.exec(KEY_BLOCK_TABLES);
  return db;
}

function merge(db: InstanceType<typeof Database>, level: KeyLevel, sorted: Pair[]): void {
  const keys = Float64Array.from(sorted, (p) => p[0]);
  const ids = Float64Array.from(sorted, (p) => p[1]);
  db.transaction(() => mergeIntoLevel(db, level, arrayPairs(keys, ids)))();
}

function blocksOf(db: InstanceType<typeof Database>, level: KeyLevel): KeyBlock[] {
  return [...levelBlocks(db, level)];
}

function pairsOf(blocks: KeyBlock[]): Pair[] {
  return blocks.flatMap(pairsIn);
}

/** What every level must be: its pairs sorted, blocks within the size, no key in two blocks. */
function expectWellFormed(blocks: KeyBlock[]): void {
  for (let i = 0; i < blocks.length; i++) {
    const b = blocks[i];
    const pairs = pairsIn(b);
    expect(pairs[0][0]).toBe(b.first);
    for (let j = 1; j < pairs.length; j++) expect(byKeyThenId(pairs[j - 1], pairs[j])).toBeLessThan(0);
    if (i > 0) expect(pairsIn(blocks[i - 1]).at(-1)?.[0]).toBeLessThan(b.first);
  }
}

describe('a level of key blocks', () => {
  it('holds every pair merged into it, once, in full blocks, through merges big and small', () => {
    const db = open();
    const next = random(11);
    let model: Pair[] = [];
    let id = 1;
    for (const n of [5_000, 3, 40_000, 1, 200, 25_000, 0, 7_000]) {
      const batch = pairs(n, id, next);
      id += n;
      merge(db, 'key_blocks_recent', batch);
      model = [...model, ...batch].sort(byKeyThenId);
      const blocks = blocksOf(db, 'key_blocks_recent');
      expectWellFormed(blocks);
      expect(pairsOf(blocks)).toEqual(model);
    }
    // merged again, pairs it holds are kept once
    merge(db, 'key_blocks_recent', model.slice(100, 3_000));
    expect(pairsOf(blocksOf(db, 'key_blocks_recent'))).toEqual(model);
    // merges of many pairs leave the blocks nearly full: few short ones, and pairs in whole bytes (about 38 bits
    // for a key's difference and 17 for an id here: 5 and 3 bytes)
    const blocks = blocksOf(db, 'key_blocks_recent');
    const bytes = db.prepare('SELECT sum(length(keys)) FROM key_blocks_recent').pluck().get() as number;
    expect(bytes / model.length).toBeLessThan(8.25);
    expect(bytes / blocks.length).toBeGreaterThan(0.85 * BLOCK_BYTES);
  }, 120_000); // many merges of a real database: heavy, whatever else the machine runs

  it('rewrites only the blocks whose range receives pairs', () => {
    const db = open();
    const next = random(13);
    merge(db, 'key_blocks', pairs(30_000, 1, next));
    const rows = () =>
      db.prepare('SELECT first_k, hex(keys) FROM key_blocks ORDER BY first_k').raw().all() as [number, string][];
    const before = new Set(rows().map(([first, hex]) => `${first}:${hex}`));
    merge(db, 'key_blocks', pairs(2, 40_000, next));
    const changed = rows().filter(([first, hex]) => !before.has(`${first}:${hex}`));
    // each new pair's block, and the block its overflow was cut into
    expect(changed.length).toBeGreaterThan(0);
    expect(changed.length).toBeLessThanOrEqual(4);
  });

  it('is folded into the main level whole, and emptied', () => {
    const db = open();
    const next = random(5);
    const main = pairs(30_000, 1, next);
    const recent = pairs(8_000, 30_001, next);
    merge(db, 'key_blocks', main);
    merge(db, 'key_blocks_recent', recent);
    db.transaction(() => {
      mergeIntoLevel(db, 'key_blocks', levelPairs(db, 'key_blocks_recent'));
      db.prepare('DELETE FROM key_blocks_recent').run();
    })();
    const blocks = blocksOf(db, 'key_blocks');
    expectWellFormed(blocks);
    expect(pairsOf(blocks)).toEqual([...main, ...recent].sort(byKeyThenId));
    expect(blocksOf(db, 'key_blocks_recent')).toEqual([]);
  });

  it('gives the ids of the keys asked, none for keys it does not hold, and sees merges by version', () => {
    const db = open();
    const next = random(3);
    const held = pairs(12_000, 1, next);
    merge(db, 'key_blocks', held);
    const reader = new LevelReader(db, 'key_blocks');
    const idsOfKey = new Map<number, number[]>();
    for (const [k, id] of held) idsOfKey.set(k, [...(idsOfKey.get(k) ?? []), id]);
    const asked = [...idsOfKey.keys()].filter((_, i) => i % 3 === 0);
    const absent = Array.from({ length: 2_000 }, () => Math.floor(next() * 2 ** 47)).filter((k) => !idsOfKey.has(k));
    const found: number[] = [];
    reader.idsOf(
      [...asked, ...absent, 0, 2 ** 47 - 1].sort((a, b) => a - b),
      'v1',
      (id) => found.push(id),
    );
    expect(found.sort((a, b) => a - b)).toEqual(asked.flatMap((k) => idsOfKey.get(k) ?? []).sort((a, b) => a - b));
    // a merge since: the same version would read stale first keys, a new one reads them again
    const later = pairs(3_000, 20_001, next);
    merge(db, 'key_blocks', later);
    const laterFound: number[] = [];
    reader.idsOf(
      later.map((p) => p[0]).filter((k, i, all) => i === 0 || all[i - 1] !== k),
      'v2',
      (id) => laterFound.push(id),
    );
    expect(laterFound.sort((a, b) => a - b)).toEqual(later.map((p) => p[1]).sort((a, b) => a - b));
  });
});

describe('a level reader keeping blocks', () => {
  it('keeps the blocks it reads while the budget has room, until the level changes or it forgets them', () => {
    const db = open();
    const held = pairs(12_000, 1, random(5));
    merge(db, 'key_blocks', held);
    const rows = db.prepare('SELECT first_k, length(keys) FROM key_blocks ORDER BY first_k').raw().all() as [
      number,
      number,
    ][];
    const room = 10 * BLOCK_BYTES;
    // blocks are read in key order, each kept when it fits in what is left
    const kept = new Set<number>();
    let left = room;
    for (const [first, bytes] of rows) {
      if (bytes > left) continue;
      kept.add(first);
      left -= bytes;
    }
    expect(kept.size).toBeGreaterThanOrEqual(10);
    expect(kept.size).toBeLessThan(rows.length);
    const budget = new BlockBudget(room);
    const reader = new LevelReader(db, 'key_blocks', budget);
    const firsts = rows.map(([first]) => first);
    const idsOf = (keys: number[], version: string): number[] => {
      const found: number[] = [];
      reader.idsOf(keys, version, (id) => found.push(id));
      return found.sort((a, b) => a - b);
    };
    const idsHeld = (keys: number[]): number[] =>
      held
        .filter(([k]) => keys.includes(k))
        .map(([, id]) => id)
        .sort((a, b) => a - b);
    expect(idsOf(firsts, 'v1')).toEqual(idsHeld(firsts));
    expect(budget.left).toBe(left);
    // with the level gone from the file, the blocks kept still answer at the same version, the others cannot
    db.exec('DELETE FROM key_blocks');
    const keptFirsts = firsts.filter((f) => kept.has(f));
    expect(idsOf(keptFirsts, 'v1')).toEqual(idsHeld(keptFirsts));
    const other = firsts.find((f) => !kept.has(f)) ?? 0;
    expect(() => idsOf([other], 'v1')).toThrow(/changed during a lookup/);
    // a new version reads the level again: empty now
    expect(idsOf(keptFirsts, 'v2')).toEqual([]);
    expect(budget.left).toBe(room);
    // forget gives back what the reader kept
    merge(db, 'key_blocks', held);
    expect(idsOf(firsts, 'v3')).toEqual(idsHeld(firsts));
    expect(budget.left).toBe(left);
    reader.forget();
    expect(budget.left).toBe(room);
  });
});

describe('a level reader keeping a big level', () => {
  it('answers from what it kept as from the file, over many chunks of kept blocks and a block bigger than one', () => {
    const db = open();
    const next = random(43);
    const held = pairs(170_000, 1, next);
    // a key shared by so many pairs that its block is bigger than the first chunks blocks are kept in
    const crowded = held[85_000][0];
    for (let i = 0; i < 30_000; i++) held.push([crowded, 200_000 + i]);
    held.sort(byKeyThenId);
    merge(db, 'key_blocks', held);
    const blockBytes = db.prepare('SELECT sum(length(keys)), max(length(keys)) FROM key_blocks').raw().get() as [
      number,
      number,
    ];
    expect(blockBytes[0]).toBeGreaterThan(2 ** 20);
    expect(blockBytes[1]).toBeGreaterThan(2 ** 16);
    const model = new Map<number, number[]>();
    for (const [k, id] of held) {
      const list = model.get(k);
      if (list === undefined) model.set(k, [id]);
      else list.push(id);
    }
    const absent = Array.from({ length: 5_000 }, () => Math.floor(next() * 2 ** 47)).filter((k) => !model.has(k));
    const asked = [...model.keys(), ...absent].sort((a, b) => a - b);
    const budget = new BlockBudget(2 ** 30);
    const reader = new LevelReader(db, 'key_blocks', budget);
    const idsByKey = (keys: number[]): Map<number, number[]> => {
      const found = new Map<number, number[]>();
      // asked in pieces of 5,000 keys, as lookups ask
      for (let from = 0; from < keys.length; from += 5_000) {
        const piece = keys.slice(from, from + 5_000);
        const ids: number[] = [];
        reader.idsOf(piece, 'v1', (id) => ids.push(id));
        for (const id of ids) {
          const key = keyOfId.get(id) as number;
          const list = found.get(key);
          if (list === undefined) found.set(key, [id]);
          else list.push(id);
        }
      }
      for (const list of found.values()) list.sort((a, b) => a - b);
      return found;
    };
    const keyOfId = new Map(held.map(([k, id]) => [id, k]));
    expect(idsByKey(asked)).toEqual(model);
    expect(budget.left).toBe(2 ** 30 - blockBytes[0]);
    // every block kept: with the level gone from the file, the same answers at the same version
    db.exec('DELETE FROM key_blocks');
    expect(idsByKey(asked)).toEqual(model);
  });
});
