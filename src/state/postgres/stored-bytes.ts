/** How a PostgreSQL state keeps keys, hashes and raw UIDs: as bytes, the decoded base64 where it is the usual size. */

/** The bytes of a SHA-256 hash (44 base64 characters). */
export const HASH_BYTES = 32;
/** The bytes of a raw UID as the service sends it (44 base64 characters). */
export const RAW_UID_BYTES = 33;

// ends a text kept as its UTF-8 bytes: no UTF-8 text holds this byte, so the text's end is found by it, and a text
// never reads back as the decoded bytes of a base64 one (those are exactly `width` bytes, a text never is)
const TEXT_END = 0xff;

/**
 * The bytes kept for `text` at `out[at...]`: the `width` bytes a canonical base64 text of that size stands for
 * (every hash the tool makes, every raw UID the service sends), else its UTF-8 bytes and TEXT_END (twice when that
 * would make exactly `width` bytes). `out` is new when not given. Two texts never share bytes.
 */
export function bytesOfText(text: string, width: number, head?: number): Buffer {
  const at = head === undefined ? 0 : 1;
  if (text.length === Math.ceil(width / 3) * 4) {
    const out = Buffer.allocUnsafe(at + width);
    if (head !== undefined) out[0] = head;
    if (out.write(text, at, 'base64') === width && out.toString('base64', at) === text) return out;
  }
  const size = Buffer.byteLength(text, 'utf8');
  const marks = size + 1 === width ? 2 : 1;
  const out = Buffer.allocUnsafe(at + size + marks);
  if (head !== undefined) out[0] = head;
  out.write(text, at, 'utf8');
  out.fill(TEXT_END, at + size);
  return out;
}

/** The text of bytes[from...] kept by bytesOfText with this width. */
export function textOfBytes(bytes: Buffer, width: number, from = 0): string {
  const size = bytes.length - from;
  if (size === width) return bytes.toString('base64', from);
  let end = bytes.length;
  while (end > from && bytes[end - 1] === TEXT_END) end--;
  return bytes.toString('utf8', from, end);
}

/** bytesOfText of a raw UID, null kept. */
export function rawUidBytes(text: string | null): Buffer | null {
  return text === null ? null : bytesOfText(text, RAW_UID_BYTES);
}

/** textOfBytes of a raw UID, null kept. */
export function rawUidText(bytes: Buffer | null): string | null {
  return bytes === null ? null : textOfBytes(bytes, RAW_UID_BYTES);
}

/** The key column of an entry: its type's code, then its hash's bytes. */
export function entryKeyOf(typeCode: number, hash: string): Buffer {
  return bytesOfText(hash, HASH_BYTES, typeCode);
}

/** The hash of an entry's key column. */
export function hashOfKey(key: Buffer): string {
  return textOfBytes(key, HASH_BYTES, 1);
}
