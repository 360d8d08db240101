// Key blocks alone: every pair kept at every width, and a block that fails its checksum refused.
import { describe, expect, it } from 'vitest';
import {
  BLOCK_BYTES,
  BLOCK_HEADER,
  BlockWriter,
  KeyBlock,
  bytesOf,
  encodeBlock,
  forEachIdFrom,
  readHeader,
} from '../../src/state/key-blocks.js';
import { type Pair, byKeyThenId, idsIn, pairsIn, random } from './pairs.js';

// values where a 24-bit piece or a 32-bit word ends, and the widest lookup key
const EDGES = [0, 1, 2 ** 24 - 1, 2 ** 24, 2 ** 25, 2 ** 32 - 1, 2 ** 32, 2 ** 47 - 1];

/** Distinct values below 2^bits, with 0 and 2^bits - 1 (so that exactly `bits` are needed) and the edges below. */
function valuesOf(bits: number, n: number, next: () => number): number[] {
  const top = 2 ** bits - 1;
  const set = new Set([0, top, Math.floor(top / 2), ...EDGES.filter((v) => v <= top)]);
  for (let i = 0; i < n; i++) set.add(Math.floor(next() * (top + 1)));
  return [...set].sort((a, b) => a - b);
}

/** The length of the block at `at` of `bytes`, from its header (readHeader). */
function lengthAt(bytes: Buffer, at: number): number {
  return readHeader(bytes, at).length;
}

/** Checks that a block holds exactly these pairs (keys distinct) by every way of reading it. */
function expectHolds(block: KeyBlock, pairs: Pair[]): void {
  expect(block.count).toBe(pairs.length);
  expect(pairsIn(block)).toEqual(pairs);
  const held = new Set(pairs.map((p) => p[0]));
  for (const [key, id] of pairs) {
    expect(idsIn(block, key)).toEqual([id]);
    // the keys next to a held one, when not held themselves
    for (const near of [key - 1, key + 1]) if (!held.has(near)) expect(idsIn(block, near)).toEqual([]);
  }
}

describe('bytesOf', () => {
  it('counts the bytes a value needs, at least one', () => {
    const values = [0, 1, 2, 255, 256, 2 ** 24 - 1, 2 ** 24, 2 ** 32 - 1, 2 ** 32, 2 ** 47 - 1, 2 ** 48 - 1];
    expect(values.map(bytesOf)).toEqual([1, 1, 1, 1, 2, 3, 4, 4, 5, 6, 6]);
  });
});

describe('a key block', () => {
  it('keeps every pair at every width of keys and ids from 1 to 48 bits, edge values included', () => {
    const next = random(17);
    const first = 1_000_003;
    for (let keyBits = 1; keyBits <= 48; keyBits++) {
      const deltas = valuesOf(keyBits, 6, next);
      const kb = Math.ceil(keyBits / 8);
      for (let idBits = 1; idBits <= 48; idBits++) {
        const ids = valuesOf(idBits, 6, next);
        const ib = Math.ceil(idBits / 8);
        // as many ids as keys, the widest id among them
        const chosen = deltas.map((_, i) => ids[Math.min(ids.length - 1, (i * 7) % ids.length)]);
        chosen[chosen.length - 1] = 2 ** idBits - 1;
        const pairs = deltas.map((d, i): Pair => [first + d, chosen[i]]);
        const blob = encodeBlock(
          pairs.map((p) => p[0]),
          pairs.map((p) => p[1]),
          pairs.length,
        );
        expect([blob[0], blob[1], blob.readUInt16LE(2)]).toEqual([0x50 + kb, ib, pairs.length]);
        // the header, the pairs, and the 4-byte checksum
        expect(blob.length).toBe(BLOCK_HEADER + pairs.length * (kb + ib) + 4);
        expect(readHeader(blob, 0)).toEqual({ kb, ib, count: pairs.length, length: blob.length });
        expectHolds(new KeyBlock(first, blob), pairs);
      }
    }
  });

  it('is read in place among other blocks, and its length found from its header', () => {
    const a = encodeBlock([10, 11, 500], [7, 8, 2 ** 40], 3);
    const b = encodeBlock([2 ** 46, 2 ** 47 - 1], [1, 2], 2);
    const joined = Buffer.concat([a, b, Buffer.from([0xff, 0xff, 0xff])]);
    expect(lengthAt(joined, 0)).toBe(a.length);
    expect(lengthAt(joined, a.length)).toBe(b.length);
    // a block whose header says more bytes than are left is refused as damaged
    expect(() => lengthAt(joined.subarray(0, a.length + b.length - 1), a.length)).toThrow(/checksum/);
    expect(() => lengthAt(joined, a.length + b.length + 1)).toThrow(/checksum/);
    // no stray bits: the bytes around a block do not leak into its values
    const block = new KeyBlock(2 ** 46, joined.subarray(a.length, a.length + b.length));
    expectHolds(block, [
      [2 ** 46, 1],
      [2 ** 47 - 1, 2],
    ]);
  });

  it('gives every id of a key shared by several pairs', () => {
    const keys = [100, 100, 100, 101, 2_000, 2_000];
    const ids = [3, 9, 40, 1, 2, 70_000];
    const block = new KeyBlock(100, encodeBlock(keys, ids, keys.length));
    expect([idsIn(block, 100), idsIn(block, 101), idsIn(block, 2_000), idsIn(block, 99), idsIn(block, 102)]).toEqual([
      [3, 9, 40],
      [1],
      [2, 70_000],
      [],
      [],
    ]);
  });

  it('finds each key of a full block however its keys are spread between the first and the last', () => {
    const next = random(29);
    const spreads: Record<string, (i: number) => number> = {
      even: () => Math.floor(next() * 2 ** 40),
      // all but a few keys crowded at the low end, then far ones: a guess from the spread lands far off
      crowdedLow: (i) => (i % 50 === 49 ? 2 ** 40 + Math.floor(next() * 2 ** 40) : Math.floor(next() * 1_000)),
      crowdedHigh: (i) => (i % 50 === 49 ? Math.floor(next() * 2 ** 20) : 2 ** 40 + Math.floor(next() * 1_000)),
      // runs of one key shared by several pairs
      runs: (i) => Math.floor(i / 7) * 1_000 + (i % 7 === 6 ? 1 : 0),
    };
    for (const [name, keyOf] of Object.entries(spreads)) {
      const pairs: Pair[] = [];
      for (let i = 0; i < 120; i++) pairs.push([5_000 + keyOf(i), i + 1]);
      pairs.sort(byKeyThenId);
      const keys = pairs.map((p) => p[0]);
      const block = new KeyBlock(
        keys[0],
        encodeBlock(
          keys,
          pairs.map((p) => p[1]),
          pairs.length,
        ),
      );
      const asked = new Set<number>();
      for (const k of keys) for (const near of [k - 1, k, k + 1]) asked.add(near);
      asked.add(keys[0] - 1_000);
      asked.add(keys[keys.length - 1] + 1_000);
      for (const key of asked) {
        const expected = pairs.filter((p) => p[0] === key).map((p) => p[1]);
        expect({ name, key, ids: idsIn(block, key) }).toEqual({ name, key, ids: expected });
      }
    }
  });

  it('gives the same ids searched from any pair of the block', () => {
    const next = random(37);
    const pairs: Pair[] = [];
    for (let i = 0; i < 150; i++) pairs.push([7_000 + Math.floor(next() * 2 ** 30), i + 1]);
    // a key shared by three pairs, at the start, in the middle and at the end of the block
    for (const at of [0, 75, 149]) pairs.push([pairs[at][0], 1_000 + at], [pairs[at][0], 2_000 + at]);
    pairs.sort(byKeyThenId);
    const keys = pairs.map((p) => p[0]);
    const blob = encodeBlock(
      keys,
      pairs.map((p) => p[1]),
      pairs.length,
    );
    const header = readHeader(blob, 0);
    const asked = new Set([keys[0] - 1, keys[keys.length - 1] + 1]);
    for (const k of keys) for (const near of [k - 1, k, k + 1]) asked.add(near);
    for (const key of asked) {
      const expected = pairs.filter((p) => p[0] === key).map((p) => p[1]);
      for (let guess = 0; guess < header.count; guess++) {
        const found: number[] = [];
        forEachIdFrom(blob, BLOCK_HEADER, header.kb, header.ib, header.count, key - keys[0], guess, (id) =>
          found.push(id),
        );
        if (found.join() !== expected.join()) expect({ key, guess, found }).toEqual({ key, guess, found: expected });
      }
    }
  });

  it('is refused when its blob does not match its header, its header is wrong, or a byte fails the checksum', () => {
    const blob = encodeBlock([5, 6], [1, 2], 2);
    expect(() => new KeyBlock(5, blob.subarray(0, blob.length - 1))).toThrow(/checksum/);
    expect(() => new KeyBlock(5, Buffer.concat([blob, Buffer.from([0])]))).toThrow(/checksum/);
    expect(() => new KeyBlock(5, blob.subarray(0, 2))).toThrow(/checksum/);
    for (let i = 0; i < blob.length; i++) {
      const flipped = Buffer.from(blob);
      flipped[i] ^= 0x10;
      expect(() => new KeyBlock(5, flipped)).toThrow(/checksum/);
      expect(() => lengthAt(flipped, 0)).toThrow(/checksum/);
    }
    for (const [b0, b1] of [
      [0, 1],
      [7, 1],
      [0x40, 1],
      [0x50, 1],
      [0x57, 1],
      [0x51, 0],
      [0x51, 7],
      [1, 7],
    ]) {
      const bad = Buffer.from(blob);
      bad[0] = b0;
      bad[1] = b1;
      expect(() => new KeyBlock(5, bad)).toThrow(/checksum/);
      expect(() => lengthAt(bad, 0)).toThrow(/checksum/);
    }
  });
});

describe('a block writer', () => {
  it('cuts full blocks, never between two pairs of one key, and grows one block for a crowded key', () => {
    const given: [number, Buffer][] = [];
    const writer = new BlockWriter((first, blob) => given.push([first, blob]));
    const next = random(7);
    const sorted: Pair[] = [];
    for (let i = 1; i <= 20_000; i++) sorted.push([Math.floor(next() * 2 ** 47), i]);
    // some keys shared by two ids, and one by more pairs than a block holds
    for (let i = 0; i < 20_000; i += 97) sorted.push([sorted[i][0], 30_000 + i]);
    const big = sorted[10_000][0];
    for (let i = 0; i < 2_000; i++) sorted.push([big, 1_000_000 + i]);
    sorted.sort(byKeyThenId);
    for (const [k, id] of sorted) writer.push(k, id);
    writer.flush();
    const blocks = given.map(([first, blob]) => new KeyBlock(first, blob));
    expect(given.every(([, blob]) => blob[0] > 0x50)).toBe(true);
    const all = blocks.flatMap(pairsIn);
    expect(all).toEqual(sorted);
    for (let i = 0; i < blocks.length; i++) {
      expect(blocks[i].first).toBe(given[i][0]);
      if (i > 0) expect(pairsIn(blocks[i - 1]).at(-1)?.[0]).toBeLessThan(blocks[i].first);
    }
    const oversize = given.filter(([, blob]) => blob.length > BLOCK_BYTES);
    expect(oversize.map(([first]) => first)).toEqual([big]);
    // blocks are cut when the next pair would not fit (or would widen the block past the size): nearly full
    const normal = given.filter(([, blob]) => blob.length <= BLOCK_BYTES);
    const bytes = normal.reduce((sum, [, blob]) => sum + blob.length, 0);
    expect(bytes / normal.length).toBeGreaterThan(0.95 * BLOCK_BYTES);
    // a pair takes the bytes its block's widest values need: 20-bit ids (3 bytes) and differences of about 36 bits (5)
    expect(bytes / all.length).toBeLessThan(8.1);
  });
});
