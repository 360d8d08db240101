/** Why a state file cannot be written, in the user's words: a read-only file system, or a permission. */
import { accessSync, constants } from 'node:fs';
import { dirname } from 'node:path';
import { StateError } from './errors.js';

export class StateAccessError extends StateError {}

/**
 * SQLite writes beside a state file even to read it, and says only "unable to open" when it cannot: what is in the
 * way (a read-only mount, a permission on the file or its directory), or null when nothing is.
 */
export function stateAccessError(
  path: string,
  access: (path: string) => void = (p) => accessSync(p, constants.W_OK),
  { writesFile = true }: { writesFile?: boolean } = {},
): StateAccessError | null {
  const dir = dirname(path);
  const beside = `${path}-wal and ${path}-shm`;
  const targets: [string, string][] = [[`its directory ${dir}`, dir]];
  if (writesFile) targets.unshift(['the file', path]);
  for (const [what, target] of targets) {
    let code: unknown;
    try {
      access(target);
      continue;
    } catch (err) {
      code = errnoOf(err);
    }
    if (code === 'EROFS') {
      return new StateAccessError(
        `cannot write state file ${path}: it is on a read-only file system, and SQLite writes ${beside} beside it ` +
          'even to read it; copy the file to a writable directory, or mount it read-write',
        path,
      );
    }
    if (code === 'EACCES' || code === 'EPERM') {
      return new StateAccessError(
        target === path
          ? `cannot write state file ${path}: permission denied on the file; run as a user who may write it, or give it write permission`
          : `cannot write state file ${path}: permission denied on ${what}, where SQLite writes ${beside} beside it; ` +
              'run as a user who may write there, or copy the file to a writable directory',
        path,
      );
    }
  }
  return null;
}

export function errnoOf(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'string'
    ? err.code
    : undefined;
}
