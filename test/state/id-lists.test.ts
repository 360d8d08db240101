/** The due lists' piece codec: ascending ids as varint gaps, and the UTC day of an r. */
import { describe, expect, it } from 'vitest';
import { dayOf, decodeIds, encodeIds, sortedUnique } from '../../src/state/id-lists.js';

function decoded(bytes: Uint8Array): number[] {
  const ids: number[] = [];
  decodeIds(bytes, (id) => ids.push(id));
  return ids;
}

describe('due list pieces', () => {
  it('gives back every id in order, small gaps in one byte, large ids up to 2^53', () => {
    const run = Array.from({ length: 1_000 }, (_, i) => 500 + i);
    expect(decoded(encodeIds(run))).toEqual(run);
    // the first gap (from 0) takes two bytes, every later one one byte, and the check two
    expect(encodeIds(run).length).toBe(1_001 + 2);
    const spread = [1, 127, 128, 16_383, 16_384, 2 ** 31, 2 ** 32 + 5, Number.MAX_SAFE_INTEGER];
    expect(decoded(encodeIds(spread))).toEqual(spread);
    expect(decoded(encodeIds([]))).toEqual([]);
  });

  it('refuses a piece any of whose bytes was flipped, before giving any id', () => {
    const piece = encodeIds([3, 4, 5, 900, 70_000]);
    for (let i = 0; i < piece.length; i++) {
      const flipped = Buffer.from(piece);
      flipped[i] ^= 0x02;
      const ids: number[] = [];
      expect(() => decodeIds(flipped, (id) => ids.push(id))).toThrow(/a due list piece fails its checksum/);
      expect(ids).toEqual([]);
    }
  });

  it('refuses ids out of order, and a piece cut inside a number', () => {
    expect(() => encodeIds([3, 3])).toThrow(RangeError);
    expect(() => encodeIds([5, 2])).toThrow(RangeError);
    const bytes = encodeIds([1, 300]);
    expect(() => decodeIds(bytes.subarray(0, bytes.length - 1), () => {})).toThrow(/checksum/);
  });

  it('sorts ids once each, and days are UTC days of r', () => {
    expect([...sortedUnique([5, 1, 5, 3, 1])]).toEqual([1, 3, 5]);
    expect(dayOf(Date.UTC(2025, 2, 10) / 1000)).toBe(Date.UTC(2025, 2, 10) / 86_400_000);
    expect(dayOf(Date.UTC(2025, 2, 10) / 1000 + 86_399)).toBe(Date.UTC(2025, 2, 10) / 86_400_000);
    expect(dayOf(Date.UTC(2025, 2, 10) / 1000 - 1)).toBe(Date.UTC(2025, 2, 9) / 86_400_000);
  });
});
