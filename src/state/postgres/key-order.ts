/** The order a batch's keys are written in: by type's code, then hash (as strings compare), the same in every run. */
import type { DiiType } from '../../identity/index.js';
import { TYPE_CODE } from '../schema.js';

// a key as one number under 2^53: the type's code (two bits), prefixOf (seven bits a character), the position
const PREFIX_CHARS = 5;
const PREFIX = 2 ** (7 * PREFIX_CHARS);
const POSITION = 2 ** 16;

/**
 * A number for a hash's first characters that never orders two hashes against their string order: each code, a
 * missing one as 0; a code of 127 or more counts as 127 and ends what is read, as the characters after it would
 * decide between hashes it does not. Hashes with the same number are compared whole.
 */
function prefixOf(hash: string): number {
  let p = 0;
  let digits = 0;
  while (digits < PREFIX_CHARS && digits < hash.length) {
    const c = hash.charCodeAt(digits++);
    p = p * 128 + Math.min(c, 127);
    if (c >= 127) break;
  }
  return p * 128 ** (PREFIX_CHARS - digits);
}

/**
 * The positions of `updates` in the order every committer writes keys in (so no two wait for each other's locks in
 * a cycle), repeats in batch order: a sort of numbers, with hashes compared only where their first characters tie.
 */
export function keyOrder(updates: readonly { type: DiiType; hash: string }[]): Int32Array {
  const n = updates.length;
  const order = new Int32Array(n);
  const packed = new Float64Array(n);
  const byKey = (a: number, b: number): number => {
    const [x, y] = [updates[a], updates[b]];
    if (x.type !== y.type) return TYPE_CODE[x.type] - TYPE_CODE[y.type];
    return x.hash < y.hash ? -1 : x.hash > y.hash ? 1 : a - b;
  };
  for (let i = 0; i < n; i++) order[i] = i;
  if (n > POSITION) return order.sort(byKey);
  for (let i = 0; i < n; i++)
    packed[i] = (TYPE_CODE[updates[i].type] * PREFIX + prefixOf(updates[i].hash)) * POSITION + i;
  packed.sort();
  for (let i = 0, j = 0; i < n; i = j) {
    const head = Math.floor(packed[i] / POSITION);
    for (j = i; j < n && Math.floor(packed[j] / POSITION) === head; j++) order[j] = packed[j] % POSITION;
    if (j - i > 1) order.subarray(i, j).sort(byKey);
  }
  return order;
}
