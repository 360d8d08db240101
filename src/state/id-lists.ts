/** Sorted entry ids: the pieces of the per-day due lists (varint gaps), the UTC day of an r, and searches. */
import { ChecksumError, recordCheckOf } from './checksum.js';

const DAY_S = 86_400;
const LIST_CHECK = 2;

/** The UTC day of a time in Unix seconds: the day whose list an entry with that r is in. */
export function dayOf(r: number): number {
  return Math.floor(r / DAY_S);
}

/**
 * Ascending, distinct ids as each one's gap from the one before in a varint (most gaps are 1), then a record's
 * 2-byte check (checksum.ts recordCheckOf).
 */
export function encodeIds(ids: ArrayLike<number>): Buffer {
  const out = Buffer.allocUnsafe(ids.length * 8 + 8 + LIST_CHECK);
  let pos = 0;
  let before = 0;
  for (let i = 0; i < ids.length; i++) {
    let gap = ids[i] - before;
    if (!(gap > 0) || !Number.isSafeInteger(ids[i])) throw new RangeError('encodeIds: ids must ascend');
    before = ids[i];
    while (gap >= 0x80) {
      out[pos++] = (gap % 0x80) | 0x80;
      gap = Math.floor(gap / 0x80);
    }
    out[pos++] = gap;
  }
  out.writeUInt16LE(recordCheckOf(out, 0, pos), pos);
  return out.subarray(0, pos + LIST_CHECK);
}

/** The ids encodeIds wrote; ChecksumError, before giving any, for a piece that fails its check. */
export function decodeIds(bytes: Uint8Array, onId: (id: number) => void): void {
  const end = bytes.length - LIST_CHECK;
  if (end < 0 || (bytes[end] | (bytes[end + 1] << 8)) !== recordCheckOf(bytes, 0, end)) {
    throw new ChecksumError('a due list piece');
  }
  let id = 0;
  let gap = 0;
  let scale = 1;
  for (let pos = 0; pos < end; pos++) {
    const b = bytes[pos];
    gap += (b & 0x7f) * scale;
    if (b < 0x80) {
      id += gap;
      onId(id);
      gap = 0;
      scale = 1;
    } else scale *= 0x80;
  }
  if (scale !== 1) throw new ChecksumError('a due list piece');
}

/** The numbers in ascending order, each once. */
export function sortedUnique(values: ArrayLike<number>): Float64Array {
  const sorted = Float64Array.from(values).sort();
  let n = 0;
  for (let i = 0; i < sorted.length; i++) if (i === 0 || sorted[i] !== sorted[n - 1]) sorted[n++] = sorted[i];
  return sorted.subarray(0, n);
}

/** The index of the first value above `value` in ascending `values`. */
export function firstAbove(values: ArrayLike<number>, value: number): number {
  let lo = 0;
  let hi = values.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (values[mid] <= value) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Ids (or keys) as the JSON array the statements that read a list take. */
export function idList(ids: readonly number[] | Float64Array): string {
  return `[${ids.join(',')}]`;
}
