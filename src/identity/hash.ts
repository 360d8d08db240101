import { hash } from 'node:crypto';

/** Base64 (standard alphabet, padded) of SHA-256 over the UTF-8 bytes of a normalized value. */
export function sha256Base64(normalized: string): string {
  return hash('sha256', normalized, 'base64');
}

// The operator accepts any 44-char string that Java's strict base64 decoder takes (decoded length is not
// checked, so 31 to 33 bytes all pass), or 64 hex chars, which it converts to base64.
const BASE64_44 = /^[A-Za-z0-9+/]{40}(?:[A-Za-z0-9+/]{4}|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{2}==)$/;
const HEX_64 = /^[0-9a-fA-F]{64}$/;

/** A hash as the service would read it, in base64; null if the service would call it invalid. */
export function normalizeHash(input: string): string | null {
  if (input.length === 44) return BASE64_44.test(input) ? input : null;
  if (input.length === 64 && HEX_64.test(input)) return Buffer.from(input, 'hex').toString('base64');
  return null;
}

/** Whether a string has the shape of a raw UID (44-char base64). */
export function isRawUidShape(input: string): boolean {
  return input.length === 44 && BASE64_44.test(input);
}
