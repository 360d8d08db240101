/** How hashes and raw UIDs are kept in the state file: the bytes a base64 text stands for, or the text itself. */

/**
 * The value to store for a hash or raw UID: its bytes when the text is canonical base64 (what the service sends,
 * and every hash the tool makes), so the file holds 32 or 33 bytes instead of 44 characters; any other text as it
 * is. Reading gives the same text back either way (entry-record.ts EntryView.text), so nothing is lost.
 */
export function storedOf(text: string): Buffer | string {
  if (text.length === 0 || text.length % 4 !== 0) return text;
  const bytes = Buffer.from(text, 'base64');
  // canonical only: the decoder skips what is not base64, and two texts must never share bytes
  return bytes.toString('base64') === text ? bytes : text;
}

/** The text of a stored hash or raw UID (storedOf's inverse); null stays null. */
export function textOfStored(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  if (typeof value === 'string') return value;
  if (Buffer.isBuffer(value)) return value.toString('base64');
  throw new TypeError(`a hash or raw UID in the state file is a ${typeof value}`);
}
