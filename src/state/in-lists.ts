/** Values cut into IN (...) lists of the few sizes whose statements are prepared once. */
import { IN_LIST_SIZES } from './queries.js';

const MAX_IN_LIST = IN_LIST_SIZES[IN_LIST_SIZES.length - 1];

/** The prepared size a list of n values is padded up to. */
function inListSize(n: number): number {
  for (const size of IN_LIST_SIZES) if (n <= size) return size;
  return MAX_IN_LIST;
}

/**
 * The values in pages of at most the biggest size: per page, where it starts, its padded size and its
 * parameters (padding repeats the last value, which an IN list ignores).
 */
export function* inListPages<T>(values: ArrayLike<T>): Generator<[number, number, T[]]> {
  for (let start = 0; start < values.length; start += MAX_IN_LIST) {
    const end = Math.min(values.length, start + MAX_IN_LIST);
    const size = inListSize(end - start);
    const params = new Array<T>(size);
    for (let i = start; i < end; i++) params[i - start] = values[i];
    params.fill(values[end - 1], end - start);
    yield [start, size, params];
  }
}
