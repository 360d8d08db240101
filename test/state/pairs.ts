// (lookup key, id) pairs for the tests of key blocks and levels: a repeatable random stream, and their order.
import { BLOCK_HEADER, type KeyBlock, forEachIdFrom, guessOf, readHeader } from '../../src/state/key-blocks.js';

export type Pair = [number, number];

/** A repeatable stream of numbers in [0, 1). */
export function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1_664_525) + 1_013_904_223) >>> 0;
    return s / 2 ** 32;
  };
}

/** The order of a key level: by key, then by id. */
export const byKeyThenId = (a: Pair, b: Pair): number => a[0] - b[0] || a[1] - b[1];

/** A block's pairs in order, read at once as a merge reads them. */
export function pairsIn(block: KeyBlock): Pair[] {
  return Array.from({ length: block.count }, (_, i): Pair => [block.keyAt(i), block.idAt(i)]);
}

/** The ids a block holds for `key`, searched as a lookup searches it: from the place its key's value suggests. */
export function idsIn(block: KeyBlock, key: number): number[] {
  const header = readHeader(block.blob, 0);
  const delta = key - block.first;
  const found: number[] = [];
  const guess = guessOf(delta, 256 ** header.kb, header.count);
  forEachIdFrom(block.blob, BLOCK_HEADER, header.kb, header.ib, header.count, delta, guess, (id) => found.push(id));
  return found;
}
