// Key blocks and the levels made of them: what a merge leaves, what a lookup finds, against a plain sorted model.
import { describe, expect, it } from 'vitest';
import {
  BLOCK_BYTES,
  BLOCK_HEADER,
  BlockWriter,
  KeyBlock,
  blockLength,
  encodeBlock,
  widthOf,
} from '../../src/state/key-blocks.js';
import {
  type KeyLevel,
  LevelReader,
  arrayPairs,
  clearLevel,
  levelBlocks,
  levelPairs,
  mergeIntoLevel,
} from '../../src/state/key-levels.js';
import { KEY_BLOCK_TABLES } from '../../src/state/schema.js';
import Database from '../helpers/sqlite-driver.js';

type Pair = [number, number];

/** A repeatable stream of numbers in [0, 1). */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1_664_525) + 1_013_904_223) >>> 0;
    return s / 2 ** 32;
  };
}

const byKeyThenId = (a: Pair, b: Pair): number => a[0] - b[0] || a[1] - b[1];

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
  db.transaction(() => mergeIntoLevel(db, level, arrayPairs(keys, ids, -1)))();
}

function blocksOf(db: InstanceType<typeof Database>, level: KeyLevel): KeyBlock[] {
  return [...levelBlocks(db, level)];
}

function pairsOf(blocks: KeyBlock[]): Pair[] {
  return blocks.flatMap((b) => Array.from({ length: b.count }, (_, i): Pair => [b.key(i), b.id(i)]));
}

/** What every level must be: its pairs sorted, blocks within the size, no key in two blocks. */
function expectWellFormed(blocks: KeyBlock[]): void {
  for (let i = 0; i < blocks.length; i++) {
    const b = blocks[i];
    expect(b.key(0)).toBe(b.first);
    for (let j = 1; j < b.count; j++)
      expect(byKeyThenId([b.key(j - 1), b.id(j - 1)], [b.key(j), b.id(j)])).toBeLessThan(0);
    if (i > 0) expect(blocks[i - 1].last).toBeLessThan(b.first);
  }
}

describe('a key block', () => {
  it('keeps each pair, in widths just wide enough for its keys and ids', () => {
    expect([widthOf(0), widthOf(255), widthOf(256), widthOf(2 ** 40), widthOf(2 ** 47)]).toEqual([1, 1, 2, 6, 6]);
    const keys = [1_000, 1_000, 1_255, 70_000];
    const ids = [3, 9, 2, 300];
    const blob = encodeBlock(keys, ids, 0, 4);
    // differences up to 69,000 take 3 bytes, ids up to 300 take 2
    expect([blob[0], blob[1], blob.readUInt16LE(2), blob.length]).toEqual([3, 2, 4, BLOCK_HEADER + 4 * 5]);
    expect(blockLength(blob, 0)).toBe(blob.length);
    const block = new KeyBlock(1_000, blob);
    const at = (key: number) => {
      const found: number[] = [];
      block.forEachId(key, (id) => found.push(id));
      return found;
    };
    expect([at(1_000), at(1_255), at(70_000), at(999), at(1_001), at(70_001)]).toEqual([
      [3, 9],
      [2],
      [300],
      [],
      [],
      [],
    ]);
    expect(block.last).toBe(70_000);
  });

  it('is refused when its blob does not match its header', () => {
    const blob = encodeBlock([5, 6], [1, 2], 0, 2);
    expect(() => new KeyBlock(5, blob.subarray(0, blob.length - 1))).toThrow(/damaged/);
  });

  it('is cut full, never between two pairs of one key, and a key with more pairs than fit grows one block', () => {
    const given: [number, Buffer][] = [];
    const writer = new BlockWriter((first, blob) => given.push([first, blob]));
    const sorted = pairs(20_000, 1, random(7));
    // a key shared by more pairs than a block holds
    const big = sorted[10_000][0];
    const crowd: Pair[] = Array.from({ length: 400 }, (_, i): Pair => [big, 1_000_000 + i]);
    const all = [...sorted, ...crowd].sort(byKeyThenId);
    for (const [k, id] of all) writer.push(k, id);
    writer.flush();
    const blocks = given.map(([first, blob]) => new KeyBlock(first, blob));
    expectWellFormed(blocks);
    expect(pairsOf(blocks)).toEqual(all);
    const oversize = given.filter(([, blob]) => blob.length > BLOCK_BYTES);
    expect(oversize.map(([first]) => first)).toEqual([big]);
    // blocks are cut when the next pair would not fit (or would widen the block's keys past the size): nearly full
    const normal = given.filter(([, blob]) => blob.length <= BLOCK_BYTES);
    const bytes = normal.reduce((sum, [, blob]) => sum + blob.length, 0);
    expect(bytes / normal.length).toBeGreaterThan(0.9 * BLOCK_BYTES);
  });
});

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
    // merges of many pairs leave the blocks nearly full: few short ones, and pairs of about 8 bytes or less
    const blocks = blocksOf(db, 'key_blocks_recent');
    const bytes = db.prepare('SELECT sum(length(keys)) FROM key_blocks_recent').pluck().get() as number;
    expect(bytes / model.length).toBeLessThan(9);
    expect(bytes / blocks.length).toBeGreaterThan(0.85 * BLOCK_BYTES);
  });

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
      clearLevel(db, 'key_blocks_recent');
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
