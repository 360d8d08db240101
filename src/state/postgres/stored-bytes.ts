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

/** The most bytes bytesOfText keeps for `text` (room to leave before writeTextBytes). */
export function textBytesBound(text: string, width: number): number {
  return Math.max(width, 3 * text.length + 2);
}

/**
 * Writes the bytes bytesOfText keeps for `text` at out[at...] (which has textBytesBound's room) and returns their
 * count: the base64 decoded straight into `out` when it is canonical, so that no Buffer is made per text.
 */
export function writeTextBytes(text: string, width: number, out: Buffer, at: number): number {
  if (decodeCanonical(text, width, out, at)) return width;
  const size = out.write(text, at, 'utf8');
  const marks = size + 1 === width ? 2 : 1;
  out.fill(TEXT_END, at + size, at + size + marks);
  return size + marks;
}

/** The text of bytes[from...] kept by bytesOfText with this width. */
export function textOfBytes(bytes: Buffer, width: number, from = 0): string {
  const size = bytes.length - from;
  if (size === width) return bytes.toString('base64', from);
  let end = bytes.length;
  while (end > from && bytes[end - 1] === TEXT_END) end--;
  return bytes.toString('utf8', from, end);
}

// the value of each base64 character (the standard alphabet), -1 for any other character
const DIGIT = new Int8Array(128).fill(-1);
for (const [i, c] of [...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'].entries()) {
  DIGIT[c.charCodeAt(0)] = i;
}

/**
 * Whether `text` is the canonical base64 of exactly 32 or 33 bytes (`width`): of 32, 43 characters whose last
 * carries 2 bits that decoding drops (so they must be 0), then '='; of 33, 44 characters, every bit used. A loop
 * over a table: it runs for every hash and raw UID sent and read.
 */
function canonical(text: string, width: number): boolean {
  if (text.length !== 44) return false;
  const digits = width === HASH_BYTES ? 43 : width === RAW_UID_BYTES ? 44 : 0;
  if (digits === 0) return false;
  for (let i = 0; i < digits; i++) {
    const c = text.charCodeAt(i);
    if (c >= 128 || DIGIT[c] < 0) return false;
  }
  return digits === 44 || (text.charCodeAt(43) === 61 && (DIGIT[text.charCodeAt(42)] & 3) === 0);
}

/** A base64 character's value, or -1. */
function digit(c: number): number {
  return c < 128 ? DIGIT[c] : -1;
}

/**
 * Decodes `text` into out[at...] when it is the canonical base64 of exactly `width` bytes (32 or 33), and says
 * whether it was (out[at...] may be written either way): a loop over a table, as canonical() checks it, cheaper
 * than a Buffer's base64 write for the few characters of every hash and raw UID sent.
 */
export function decodeCanonical(text: string, width: number, out: Buffer, at: number): boolean {
  if (text.length !== 44) return false;
  // four characters make three bytes: ten such and a last three (then '=') make 32, eleven make 33
  const quads = width === HASH_BYTES ? 10 : width === RAW_UID_BYTES ? 11 : 0;
  if (quads === 0) return false;
  let o = at;
  for (let i = 0; i < quads * 4; i += 4) {
    const a = digit(text.charCodeAt(i));
    const b = digit(text.charCodeAt(i + 1));
    const c = digit(text.charCodeAt(i + 2));
    const d = digit(text.charCodeAt(i + 3));
    if ((a | b | c | d) < 0) return false;
    const v = (a << 18) | (b << 12) | (c << 6) | d;
    out[o] = v >> 16;
    out[o + 1] = (v >> 8) & 255;
    out[o + 2] = v & 255;
    o += 3;
  }
  if (quads === 11) return true;
  const a = digit(text.charCodeAt(40));
  const b = digit(text.charCodeAt(41));
  const c = digit(text.charCodeAt(42));
  if ((a | b | c) < 0 || (c & 3) !== 0 || text.charCodeAt(43) !== 61) return false;
  const v = (a << 10) | (b << 4) | (c >> 2);
  out[o] = v >> 8;
  out[o + 1] = v & 255;
  return true;
}

/**
 * The base64 of the bytes bytesOfText keeps for `text` (what the server decodes): the text itself when it is the
 * canonical base64 of `width` bytes, so that the usual hash or raw UID is sent without being decoded here.
 */
export function sentOf(text: string, width: number): string {
  return canonical(text, width) ? text : bytesOfText(text, width).toString('base64');
}

/** sentOf's inverse: the text of kept bytes read as base64 (line breaks, as the server's encode() makes, ignored). */
export function textOfSent(b64: string, width: number): string {
  return canonical(b64, width) ? b64 : textOfBytes(Buffer.from(b64, 'base64'), width);
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
