/** How a PostgreSQL state keeps keys, hashes and raw UIDs: as bytes, the decoded base64 where it is a usual size. */

/** The bytes of a SHA-256 hash (44 base64 characters). */
export const HASH_BYTES = 32;
/**
 * The bytes of a raw UID as the service sends it (44 base64 characters): 33, or 32 in the older format (ending in
 * one `=`) that the local service sends too. A raw UID column keeps either as its bytes.
 */
export const RAW_UID_BYTES = 33;
// 44 base64 characters stand for 33 bytes, or for 32 when the last is one '='
const FULL_BYTES = 33;
const PADDED_BYTES = 32;

// ends a text kept as its UTF-8 bytes: no UTF-8 text holds this byte, so the text's end is found by it, and a text
// never reads back as the decoded bytes of a base64 one (those are exactly a usual size, a text never is)
const TEXT_END = 0xff;

/** Whether `size` bytes of a column of this width are decoded base64: a hash's 32, a raw UID's 33 or 32. */
function usualSize(size: number, width: number): boolean {
  return size === width || (width === RAW_UID_BYTES && size === PADDED_BYTES);
}

/**
 * The bytes kept for `text` at `out[at...]`: the bytes a canonical base64 text of a usual size stands for (every
 * hash the tool makes, every raw UID the service sends), else its UTF-8 bytes and TEXT_END (more than once when
 * that would make a usual size). `out` is new when not given. Two texts never share bytes.
 */
export function bytesOfText(text: string, width: number, head?: number): Buffer {
  const at = head === undefined ? 0 : 1;
  const out = Buffer.allocUnsafe(at + textBytesBound(text, width));
  if (head !== undefined) out[0] = head;
  return out.subarray(0, at + writeTextBytes(text, width, out, at));
}

/** The most bytes bytesOfText keeps for `text` (room to leave before writeTextBytes). */
export function textBytesBound(text: string, width: number): number {
  return Math.max(width, 3 * text.length + 3);
}

/**
 * Writes the bytes bytesOfText keeps for `text` at out[at...] (which has textBytesBound's room) and returns their
 * count: the base64 decoded straight into `out` when it is canonical, so that no Buffer is made per text.
 */
export function writeTextBytes(text: string, width: number, out: Buffer, at: number): number {
  const decoded = decodeCanonical(text, width, out, at);
  if (decoded > 0) return decoded;
  const size = out.write(text, at, 'utf8');
  // one TEXT_END, or more so that the whole is no usual size
  let marks = 1;
  while (usualSize(size + marks, width)) marks++;
  out.fill(TEXT_END, at + size, at + size + marks);
  return size + marks;
}

/** The text of bytes[from...] kept by bytesOfText with this width. */
export function textOfBytes(bytes: Buffer, width: number, from = 0): string {
  if (usualSize(bytes.length - from, width)) return bytes.toString('base64', from);
  let end = bytes.length;
  while (end > from && bytes[end - 1] === TEXT_END) end--;
  return bytes.toString('utf8', from, end);
}

// the value of each base64 character (the standard alphabet), -1 for any other character
const DIGIT = new Int8Array(128).fill(-1);
for (const [i, c] of [...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'].entries()) {
  DIGIT[c.charCodeAt(0)] = i;
}

/** A base64 character's value, or -1. */
function digit(c: number): number {
  return c < 128 ? DIGIT[c] : -1;
}

/**
 * Decodes `text` into out[at...] when it is the canonical base64 of a usual size of this width and returns that
 * size, else 0 (out[at...] may be written either way): a loop over a table, cheaper than a Buffer's base64
 * write for the few characters of every hash and raw UID sent.
 */
export function decodeCanonical(text: string, width: number, out: Buffer, at: number): number {
  if (text.length !== 44) return 0;
  // four characters make three bytes: ten such and a last three (then '=') make 32, eleven make 33
  const padded = text.charCodeAt(43) === 61;
  const size = padded ? PADDED_BYTES : FULL_BYTES;
  if (!usualSize(size, width)) return 0;
  const quads = padded ? 10 : 11;
  let o = at;
  for (let i = 0; i < quads * 4; i += 4) {
    const a = digit(text.charCodeAt(i));
    const b = digit(text.charCodeAt(i + 1));
    const c = digit(text.charCodeAt(i + 2));
    const d = digit(text.charCodeAt(i + 3));
    if ((a | b | c | d) < 0) return 0;
    const v = (a << 18) | (b << 12) | (c << 6) | d;
    out[o] = v >> 16;
    out[o + 1] = (v >> 8) & 255;
    out[o + 2] = v & 255;
    o += 3;
  }
  if (!padded) return size;
  const a = digit(text.charCodeAt(40));
  const b = digit(text.charCodeAt(41));
  const c = digit(text.charCodeAt(42));
  if ((a | b | c) < 0 || (c & 3) !== 0) return 0;
  const v = (a << 10) | (b << 4) | (c >> 2);
  out[o] = v >> 8;
  out[o + 1] = v & 255;
  return size;
}

// where canonicalSize decodes the text it checks
const SCRATCH = Buffer.alloc(FULL_BYTES);

/** The bytes `text` stands for when it is the canonical base64 of a usual size of this width, else 0. */
function canonicalSize(text: string, width: number): number {
  return decodeCanonical(text, width, SCRATCH, 0);
}

/**
 * The base64 of the bytes bytesOfText keeps for `text` (what the server decodes): the text itself when it is the
 * canonical base64 of a usual size (checked by decoding it into scratch bytes), so that no Buffer is made for it.
 */
export function sentOf(text: string, width: number): string {
  return canonicalSize(text, width) > 0 ? text : bytesOfText(text, width).toString('base64');
}

/**
 * sentOf's inverse: the text of kept bytes as the server's encode() spells them in base64 (padded, lines broken).
 * Bytes of a usual size read back as that base64 itself, told by its length and padding alone: the row's checksum,
 * summed over the text, finds one that is no base64 of those bytes.
 */
export function textOfSent(b64: string, width: number): string {
  return usualSize(sentSize(b64), width) ? b64 : textOfBytes(Buffer.from(b64, 'base64'), width);
}

/** The bytes a padded base64 of 44 characters stands for (33, or 32 when it ends in one '='), else 0. */
function sentSize(b64: string): number {
  if (b64.length !== 44) return 0;
  if (b64.charCodeAt(43) !== 61) return FULL_BYTES;
  return b64.charCodeAt(42) !== 61 ? PADDED_BYTES : 0;
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
