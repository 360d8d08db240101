// Which existing file --summary-json may replace: none, an empty one, or a run summary this tool wrote.
import { mayReplaceOwnFile, mayReplaceOwnOutput } from './own-file.js';

/** A summary is a few hundred bytes; anything much larger is some other file, and is not read whole to find out. */
const MAX_SUMMARY_BYTES = 1024 * 1024;

/**
 * True when `path` may be replaced by a run summary: it does not exist, it is empty (a `mktemp` name a wrapper
 * made for it), or it is a JSON object with a string `command`, the field every summary of this tool starts from
 * (`{"command": "map", ...}`). A CSV, an unrelated JSON or anything unreadable is not, and must never be replaced.
 */
export function mayHoldSummary(path: string): boolean {
  return mayReplaceOwnFile(path, MAX_SUMMARY_BYTES, isSummary);
}

/** mayHoldSummary of an s3:// object (or a local path): its size and bytes asked of S3. */
export function mayHoldSummaryObject(path: string): Promise<boolean> {
  return mayReplaceOwnOutput(path, MAX_SUMMARY_BYTES, isSummary);
}

function isSummary(size: number, head: () => Buffer): boolean {
  if (size === 0) return true;
  if (size > MAX_SUMMARY_BYTES) return false;
  const body = JSON.parse(head().toString('utf8')) as unknown;
  return (
    typeof body === 'object' &&
    body !== null &&
    !Array.isArray(body) &&
    typeof (body as Record<string, unknown>).command === 'string'
  );
}
