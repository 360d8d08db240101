/** The shape of a raw UID as the service answers it (docs/wire-protocol.md §8.1). */

/** 1 for each character of the standard base64 alphabet, by char code. */
export const BASE64_CHAR = new Uint8Array(128);
for (const c of 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/') BASE64_CHAR[c.charCodeAt(0)] = 1;

/** Characters of a raw UID: 32 bytes give 43 characters and one `=`, 33 bytes give 44 and no padding. */
export const RAW_UID_LENGTH = 44;

/**
 * Whether a value is a raw UID: 44 characters of standard base64, of 32 bytes (ending in one `=`) or 33 bytes.
 * A loop over char codes, not a regular expression: it runs for every item of every map answer.
 */
export function isRawUid(value: unknown): value is string {
  if (typeof value !== 'string' || value.length !== RAW_UID_LENGTH) return false;
  for (let i = 0; i < RAW_UID_LENGTH - 1; i++) {
    const c = value.charCodeAt(i);
    if (c > 127 || BASE64_CHAR[c] === 0) return false;
  }
  const last = value.charCodeAt(RAW_UID_LENGTH - 1);
  return last === 61 || (last < 128 && BASE64_CHAR[last] === 1);
}
