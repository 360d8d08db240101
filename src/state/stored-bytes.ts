/** How hashes and raw UIDs are kept in the state file: the bytes a base64 text stands for, or the text itself. */

const DIGITS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
// the character code of each base64 digit, and the digit of each character code (-1: not one)
const CODE_OF_DIGIT = Uint8Array.from(DIGITS, (c) => c.charCodeAt(0));
const DIGIT_OF_CODE = new Int8Array(128).fill(-1);
for (let d = 0; d < 64; d++) DIGIT_OF_CODE[CODE_OF_DIGIT[d]] = d;
const PAD = 61; // '='

/**
 * The value to store for a hash or raw UID: its bytes when the text is canonical base64 (what the service sends,
 * and every hash the tool makes), so the file holds 32 or 33 bytes instead of 44 characters; any other text as it
 * is. Reading gives the same text back either way (textOfStored), so nothing is lost.
 */
export function storedOf(text: string): Buffer | string {
  return new StoredBytes(Math.ceil(text.length / 4) * 3).of(text);
}

/**
 * storedOf for many values: their bytes are decoded into one buffer, each value a view of its part, instead of a
 * buffer of its own each. A part is never written twice (a full buffer is replaced, and views of it keep it), so
 * every value stays valid for as long as it is held.
 */
export class StoredBytes {
  private buffer: Buffer;
  private used = 0;

  constructor(capacity: number) {
    this.buffer = Buffer.allocUnsafe(Math.max(64, capacity));
  }

  of(text: string): Buffer | string {
    const n = text.length;
    if (n === 0 || n % 4 !== 0) return text;
    let pad = 0;
    if (text.charCodeAt(n - 1) === PAD) pad = text.charCodeAt(n - 2) === PAD ? 2 : 1;
    const size = (n / 4) * 3 - pad;
    if (this.used + size > this.buffer.length) {
      this.buffer = Buffer.allocUnsafe(Math.max(2 * this.buffer.length, size));
      this.used = 0;
    }
    const out = this.buffer;
    let o = this.used;
    let bits = 0;
    for (let i = 0; i < n - pad; i++) {
      const c = text.charCodeAt(i);
      const d = c > 127 ? -1 : DIGIT_OF_CODE[c];
      if (d < 0) return text;
      bits = (bits << 6) | d;
      if ((i & 3) === 3) {
        out[o++] = bits >>> 16;
        out[o++] = (bits >>> 8) & 255;
        out[o++] = bits & 255;
        bits = 0;
      }
    }
    // canonical: the bits of the last digit that no byte fills are zero (otherwise two texts would share bytes)
    if (pad === 1) {
      if ((bits & 0b11) !== 0) return text;
      out[o++] = bits >>> 10;
      out[o++] = (bits >>> 2) & 255;
    } else if (pad === 2) {
      if ((bits & 0b1111) !== 0) return text;
      out[o++] = bits >>> 4;
    }
    const value = out.subarray(this.used, o);
    this.used = o;
    return value;
  }
}

/** The text of a stored hash or raw UID (storedOf's inverse); null stays null. */
export function textOfStored(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  if (typeof value === 'string') return value;
  if (Buffer.isBuffer(value)) return value.toString('base64');
  throw new TypeError(`a hash or raw UID in the state file is a ${typeof value}`);
}

/**
 * Whether `text` is the base64 of bytes[start, start + length): a stored hash compared with a wanted one without
 * making a string of it.
 */
export function isBase64Of(text: string, bytes: Uint8Array, start: number, length: number): boolean {
  if (text.length !== 4 * Math.ceil(length / 3)) return false;
  const end = start + length;
  let i = start;
  let t = 0;
  for (; i + 3 <= end; i += 3, t += 4) {
    const v = (bytes[i] << 16) | (bytes[i + 1] << 8) | bytes[i + 2];
    if (
      text.charCodeAt(t) !== CODE_OF_DIGIT[v >>> 18] ||
      text.charCodeAt(t + 1) !== CODE_OF_DIGIT[(v >>> 12) & 63] ||
      text.charCodeAt(t + 2) !== CODE_OF_DIGIT[(v >>> 6) & 63] ||
      text.charCodeAt(t + 3) !== CODE_OF_DIGIT[v & 63]
    )
      return false;
  }
  const left = end - i;
  if (left === 0) return true;
  const v = (bytes[i] << 16) | (left === 2 ? bytes[i + 1] << 8 : 0);
  return (
    text.charCodeAt(t) === CODE_OF_DIGIT[v >>> 18] &&
    text.charCodeAt(t + 1) === CODE_OF_DIGIT[(v >>> 12) & 63] &&
    text.charCodeAt(t + 2) === (left === 2 ? CODE_OF_DIGIT[(v >>> 6) & 63] : PAD) &&
    text.charCodeAt(t + 3) === PAD
  );
}
