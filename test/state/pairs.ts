// (lookup key, id) pairs for the tests of key blocks and levels: a repeatable random stream, and their order.

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
