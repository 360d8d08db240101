// keyOrder: the order a PostgreSQL commit writes its keys in, against a plain sort of the keys.
import { hash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { DiiType } from '../../src/identity/index.js';
import { keyOrder } from '../../src/state/postgres/key-order.js';
import { TYPE_CODE } from '../../src/state/schema.js';
import { seeded } from '../helpers/seeded-random.js';

type Key = { type: DiiType; hash: string };

/** The order by type's code, then hash as strings compare, repeats in batch order: what keyOrder must give. */
function plainOrder(keys: readonly Key[]): number[] {
  return keys
    .map((_, i) => i)
    .sort((a, b) => {
      const x = keys[a];
      const y = keys[b];
      if (x.type !== y.type) return TYPE_CODE[x.type] - TYPE_CODE[y.type];
      return x.hash < y.hash ? -1 : x.hash > y.hash ? 1 : a - b;
    });
}

/** Keys of both types: base64 hashes, repeats, hashes that begin alike, short ones, and characters past ASCII. */
function keys(count: number, seed: number): Key[] {
  const random = seeded(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)];
  const stems = [
    '',
    'a',
    'ab',
    'abcd',
    'abcde',
    'abcdef',
    'ABCDE',
    'é',
    'éé',
    '\u007f',
    '\u007e',
    '\u0080',
    '\uffff',
    '😀',
  ];
  const out: Key[] = [];
  for (let i = 0; i < count; i++) {
    const type: DiiType = random() < 0.5 ? 'email' : 'phone';
    const r = random();
    if (r < 0.5) out.push({ type, hash: hash('sha256', `k${Math.floor(random() * count)}`, 'base64') });
    else if (r < 0.7 && out.length > 0) out.push({ ...pick(out), type: random() < 0.8 ? pick(out).type : type });
    else out.push({ type, hash: pick(stems) + pick(stems) + (random() < 0.5 ? String(Math.floor(random() * 5)) : '') });
  }
  return out;
}

describe('keyOrder', () => {
  it('orders keys as a plain sort does, repeats in batch order', () => {
    for (const [count, seed] of [
      [0, 1],
      [1, 2],
      [7, 3],
      [500, 4],
      [5000, 5],
    ])
      expect(Array.from(keyOrder(keys(count, seed)))).toEqual(plainOrder(keys(count, seed)));
  });

  it('orders a batch too large to pack its positions the same way', () => {
    const many = keys(70_000, 6);
    expect(Array.from(keyOrder(many))).toEqual(plainOrder(many));
  });
});
