/** An in-memory multimap from lookup key to entry id, for the entries not yet merged into the key levels. */

const EMPTY = 0;
// a power of two (the mask), doubled whenever the table is half full
const FIRST_SLOTS = 1 << 17;

/** Open addressing over two typed arrays: a few bytes per entry instead of a Map's dozens. Keys may repeat. */
export class TailIndex {
  private keys = new Float64Array(FIRST_SLOTS);
  private ids = new Float64Array(FIRST_SLOTS);
  private mask = FIRST_SLOTS - 1;
  /** The entries it holds. */
  size = 0;

  /** Ids are positive (SQLite rowids of appended entries). */
  add(key: number, id: number): void {
    if ((this.size + 1) * 2 > this.ids.length) this.resize(this.ids.length * 2);
    let slot = slotOf(key, this.mask);
    while (this.ids[slot] !== EMPTY) slot = (slot + 1) & this.mask;
    this.keys[slot] = key;
    this.ids[slot] = id;
    this.size++;
  }

  forEach(key: number, onId: (id: number) => void): void {
    let slot = slotOf(key, this.mask);
    for (;;) {
      const id = this.ids[slot];
      if (id === EMPTY) return;
      if (this.keys[slot] === key) onId(id);
      slot = (slot + 1) & this.mask;
    }
  }

  /** Every (key, id) with an id above `after` (at least 0), as two arrays sorted by key then id. */
  sorted(after: number): { keys: Float64Array; ids: Float64Array } {
    const order = new Float64Array(this.size);
    let n = 0;
    for (let slot = 0; slot < this.ids.length; slot++) if (this.ids[slot] > after) order[n++] = this.keys[slot];
    order.subarray(0, n).sort();
    const keys = new Float64Array(n);
    const ids = new Float64Array(n);
    let out = 0;
    for (let i = 0; i < n; i++) {
      const key = order[i];
      if (i > 0 && order[i - 1] === key) continue;
      // every slot holding this key: one almost always, in probe order
      const first = out;
      for (let slot = slotOf(key, this.mask); this.ids[slot] !== EMPTY; slot = (slot + 1) & this.mask) {
        if (this.keys[slot] === key && this.ids[slot] > after) {
          keys[out] = key;
          ids[out++] = this.ids[slot];
        }
      }
      if (out - first > 1) ids.subarray(first, out).sort();
    }
    return { keys, ids };
  }

  clear(): void {
    // a slot is free by its id alone
    this.ids.fill(EMPTY);
    this.size = 0;
  }

  private resize(size: number): void {
    const oldKeys = this.keys;
    const oldIds = this.ids;
    this.keys = new Float64Array(size);
    this.ids = new Float64Array(size);
    this.mask = size - 1;
    this.size = 0;
    for (let slot = 0; slot < oldIds.length; slot++) if (oldIds[slot] !== EMPTY) this.add(oldKeys[slot], oldIds[slot]);
  }
}

/** Keys are already uniformly spread (hash bits): their low bits, above the type bit, pick the slot. */
function slotOf(key: number, mask: number): number {
  return (Math.floor(key / 2) % 1073741824) & mask;
}
