/** Copies short byte ranges four bytes at a time, through DataViews: raw UIDs and cells into output buffers. */

/** A DataView over exactly the bytes of `bytes`. */
export function viewOf(bytes: Uint8Array): DataView {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/**
 * Bytes `start` to `end` of `from` to `to` at `at`; where they end. For the tens of bytes of a cell, a word at a
 * time through DataViews (which the optimizing compiler inlines) costs a fraction of a loop over single bytes of
 * a Uint8Array, and of a call that copies a range (`set`, `Buffer.copy`), whose fixed cost is in the same range.
 */
export function copyWords(from: DataView, start: number, end: number, to: DataView, at: number): number {
  let i = start;
  for (const last = end - 4; i <= last; i += 4, at += 4) to.setInt32(at, from.getInt32(i));
  for (; i < end; i++) to.setUint8(at++, from.getUint8(i));
  return at;
}
