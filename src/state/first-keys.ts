/** The first keys of a level's blocks, in order, and a table by high bits that finds a key's block in a step or two. */

// lookup keys are below 2^47 (lookup-key.ts)
const KEY_SPACE = 2 ** 47;
// at most this many slices of the key space (4 bytes of table each)
const MAX_SLICE_BITS = 24;

/**
 * Which block of a level holds a key: the last whose first key is at or below it. Keys are hash bits, spread
 * evenly, so the key space is cut into about as many equal slices as there are blocks, and a table gives the
 * blocks that start in each slice: a key's block is among the one or two of its slice, where a binary search over
 * all the first keys would take a dozen dependent steps across a megabyte (one per block of a 20M-entry level).
 */
export class FirstKeys {
  // per slice s, the index of the first block whose first key is at or above the slice's start; then the count
  private readonly table: Int32Array;
  private readonly slices: number;
  // slice of a key: floor(key * perKey)
  private readonly perKey: number;

  constructor(readonly firsts: Float64Array) {
    const bits = Math.min(MAX_SLICE_BITS, Math.ceil(Math.log2(Math.max(1, firsts.length))));
    this.slices = 2 ** bits;
    this.perKey = this.slices / KEY_SPACE;
    this.table = new Int32Array(this.slices + 1);
    let b = 0;
    for (let s = 0; s < this.slices; s++) {
      const start = s / this.perKey;
      while (b < firsts.length && firsts[b] < start) b++;
      this.table[s] = b;
    }
    this.table[this.slices] = firsts.length;
  }

  get count(): number {
    return this.firsts.length;
  }

  /** The index of the block that may hold `key`: the last whose first key is at or below it (-1: below them all). */
  blockOf(key: number): number {
    const slice = Math.floor(key * this.perKey);
    const s = slice <= 0 ? 0 : slice >= this.slices ? this.slices - 1 : slice;
    // the first block whose first key is above the key: none before the slice's first, the next slice's first is
    let lo = this.table[s];
    let hi = this.table[s + 1];
    const { firsts } = this;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (firsts[mid] <= key) lo = mid + 1;
      else hi = mid;
    }
    return lo - 1;
  }
}
