// Whether an existing path may be replaced by a file this tool writes: nothing there, or a file it wrote itself.
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { isS3Url } from '../../pipeline/io/s3/s3-url.js';

/**
 * True when `path` does not exist, or is a regular file that `isOwn` recognizes from its size and, when it asks,
 * its first `headBytes` bytes (all of it when shorter). A directory, a device, anything unreadable: false, so an
 * input named by mistake is never replaced.
 */
export function mayReplaceOwnFile(
  path: string,
  headBytes: number,
  isOwn: (size: number, head: () => Buffer) => boolean,
): boolean {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ENOENT';
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) return false;
    return isOwn(stat.size, () => {
      const head = Buffer.alloc(Math.min(stat.size, headBytes));
      return head.subarray(0, readSync(fd, head, 0, head.length, 0));
    });
  } catch {
    return false;
  } finally {
    closeSync(fd);
  }
}

/**
 * mayReplaceOwnFile for a local path or an s3:// location: an object is told apart by its size and first bytes too
 * (asked of S3 with one ranged GET, the client loaded then). Throws the one line of an S3 that cannot be asked.
 */
export async function mayReplaceOwnOutput(
  path: string,
  headBytes: number,
  isOwn: (size: number, head: () => Buffer) => boolean,
): Promise<boolean> {
  if (!isS3Url(path)) return mayReplaceOwnFile(path, headBytes, isOwn);
  const found = await (await import('../../pipeline/io/s3/s3-text.js')).s3ObjectHead(path, headBytes);
  if (found === null) return true;
  try {
    return isOwn(found.size, () => found.head);
  } catch {
    return false;
  }
}
