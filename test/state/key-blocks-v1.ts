// Writes key blocks in format 1 (byte-wide fields, what schema 5 wrote), which the tool now only reads.

/** The bytes (1 to 6) an unsigned integer takes in format 1. */
function bytesFor(value: number): number {
  let n = 1;
  while (n < 6 && value >= 2 ** (8 * n)) n++;
  return n;
}

/** Sorted pairs as a format 1 blob: kw, iw, the count, then every key difference, then every id, little-endian. */
export function encodeV1Block(keys: readonly number[], ids: readonly number[]): Buffer {
  const n = keys.length;
  const kw = bytesFor(keys[n - 1] - keys[0]);
  const iw = bytesFor(Math.max(...ids));
  const blob = Buffer.alloc(4 + n * (kw + iw));
  blob[0] = kw;
  blob[1] = iw;
  blob.writeUInt16LE(n, 2);
  for (let i = 0; i < n; i++) {
    blob.writeUIntLE(keys[i] - keys[0], 4 + i * kw, kw);
    blob.writeUIntLE(ids[i], 4 + n * kw + i * iw, iw);
  }
  return blob;
}
