/** The order a batch's keys are written in: by type's code, then hash (as strings compare), the same in every run. */
import type { DiiType } from '../../identity/index.js';
import { TYPE_CODE } from '../schema.js';

// a key packed as one number: the type's code (two bits), the first PREFIX_CHARS characters of the hash (seven
// bits each), then the update's position: under 2^53, so that a Float64Array holds it exactly
const PREFIX_CHARS = 5;
const PREFIX = 2 ** (7 * PREFIX_CHARS);
const POSITION_BITS = 16;
const POSITION = 2 ** POSITION_BITS;

/**
 * A number for the first characters of a hash that never orders two hashes against their string order: each
 * character's code, a missing one as 0; a code of 127 or more counts as 127 and ends what is read (the characters
 * after it would decide between two hashes that it does not). Hashes with the same number are compared whole.
 */
function prefixOf(hash: string): number {
  let p = 0;
  let i = 0;
  for (; i < PREFIX_CHARS && i < hash.length; i++) {
    const c = hash.charCodeAt(i);
    if (c >= 127) {
      p = p * 128 + 127;
      i++;
      break;
    }
    p = p * 128 + c;
  }
  for (; i < PREFIX_CHARS; i++) p *= 128;
  return p;
}

/**
 * The positions of `updates` in the order every committer writes keys in (so that two of them never wait for each
 * other's locks in a cycle): by the type's code, then by hash as strings compare; repeats of a key in batch order.
 * A sort of numbers, with strings compared only among hashes that begin alike: cheaper than sorting the strings.
 */
export function keyOrder(updates: readonly { type: DiiType; hash: string }[]): Int32Array {
  const n = updates.length;
  const order = new Int32Array(n);
  for (let i = 0; i < n; i++) order[i] = i;
  const byKey = (a: number, b: number): number => {
    const x = updates[a];
    const y = updates[b];
    if (x.type !== y.type) return TYPE_CODE[x.type] - TYPE_CODE[y.type];
    return x.hash < y.hash ? -1 : x.hash > y.hash ? 1 : a - b;
  };
  if (n > POSITION) return order.sort(byKey);
  const packed = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const u = updates[i];
    packed[i] = (TYPE_CODE[u.type] * PREFIX + prefixOf(u.hash)) * POSITION + i;
  }
  packed.sort();
  for (let i = 0; i < n; i++) order[i] = packed[i] % POSITION;
  // hashes that begin alike, next to each other now: compared whole
  for (let i = 0; i < n; ) {
    const head = Math.floor(packed[i] / POSITION);
    let j = i + 1;
    while (j < n && Math.floor(packed[j] / POSITION) === head) j++;
    if (j - i > 1) order.subarray(i, j).sort(byKey);
    i = j;
  }
  return order;
}
