/** How the tool writes the hashes it outputs: `--hash-encoding base64|hex`. */

/**
 * base64 (standard, padded, 44 characters for SHA-256) is the wire format, the state file's and the default;
 * hex (lowercase, 64 characters) is what a warehouse's sha2(...) or encode(sha256(...), 'hex') gives, so an
 * output in hex joins such a column without a conversion.
 */
export type HashEncoding = 'base64' | 'hex';

export const HASH_ENCODINGS: readonly HashEncoding[] = ['base64', 'hex'];

/**
 * A hash the tool holds (base64, as prepared, sent and stored) as a cell in `encoding`; an empty cell stays
 * empty. Hex is of the bytes the base64 stands for, so a base64 hash given as input that is not 32 bytes long
 * (the service accepts 31 to 33) is written as the hex of its own length.
 */
export function hashCell(base64: string, encoding: HashEncoding | undefined): string {
  if (encoding !== 'hex' || base64 === '') return base64;
  // a hash is 44 characters; decoded into one buffer kept for it, so a cell costs no allocation but its text
  if (base64.length > MAX_SCRATCH_TEXT) return Buffer.from(base64, 'base64').toString('hex');
  const length = scratch.write(base64, 'base64');
  return scratch.toString('hex', 0, length);
}

/** Base64 text of up to this many characters decodes into `scratch`. */
const MAX_SCRATCH_TEXT = 88;
const scratch = Buffer.allocUnsafe((MAX_SCRATCH_TEXT / 4) * 3);
