// The block of a key among a level's first keys: the table by high bits gives what a binary search over them does.
import { describe, expect, it } from 'vitest';
import { FirstKeys } from '../../src/state/first-keys.js';
import { firstAbove } from '../../src/state/id-lists.js';
import { random } from './pairs.js';

/** The last index whose first key is at or below `key`, by a binary search over all of them. */
const expectedBlock = (firsts: Float64Array, key: number): number => firstAbove(firsts, key) - 1;

describe('the first keys of a level', () => {
  it('finds the block of every key as a search over all first keys does, however the blocks are spread', () => {
    const next = random(41);
    const even = (n: number): number[] => Array.from({ length: n }, () => Math.floor(next() * 2 ** 47));
    const levels: Record<string, number[]> = {
      empty: [],
      one: [2 ** 40],
      two: [0, 2 ** 47 - 1],
      even: even(5_000),
      // most blocks in one corner of the key space: many share a slice of the table, the others' slices are empty
      crowded: [...Array.from({ length: 3_000 }, () => Math.floor(next() * 2 ** 20)), ...even(40)],
      // first keys on the slices' edges (2^47 / 4,096 apart for 4,096 blocks), and one short of them
      edges: Array.from({ length: 4_096 }, (_, i) => i * 2 ** 35 - (i % 2)),
    };
    for (const [name, list] of Object.entries(levels)) {
      const firsts = Float64Array.from(new Set(list.filter((k) => k >= 0))).sort();
      const index = new FirstKeys(firsts);
      expect(index.count).toBe(firsts.length);
      const asked = [-1, 0, 1, 2 ** 47 - 1, 2 ** 47, 2 ** 48, ...even(2_000)];
      for (const f of firsts) asked.push(f - 1, f, f + 1);
      for (const key of asked) {
        const [got, expected] = [index.blockOf(key), expectedBlock(firsts, key)];
        if (got !== expected) expect({ name, key, block: got }).toEqual({ name, key, block: expected });
      }
    }
  });
});
