/** How hashes and raw UIDs are kept in the state file: the bytes a base64 text stands for, or the text itself. */

/** The bytes of a canonical base64 text (what the service sends, every hash the tool makes); any other text as is. */
export function storedOf(text: string): Buffer | string {
  if (text.length === 0 || text.length % 4 !== 0) return text;
  const bytes = Buffer.from(text, 'base64');
  // canonical only: the decoder skips what is not base64, and two texts must never share bytes
  return bytes.toString('base64') === text ? bytes : text;
}
