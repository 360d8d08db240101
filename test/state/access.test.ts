import { describe, expect, it } from 'vitest';
import { StateAccessError, stateAccessError } from '../../src/state/access.js';

/** An access check that fails with `code` for the paths `failing` picks. */
function failingAccess(code: string, failing: (path: string) => boolean) {
  return (path: string): void => {
    if (failing(path)) throw Object.assign(new Error(`${code}: ${path}`), { code });
  };
}

describe('a state file that cannot be written', () => {
  it('on a read-only file system: says so, never "not a state file"', () => {
    const err = stateAccessError(
      '/mnt/backup/s.db',
      failingAccess('EROFS', () => true),
    );
    expect(err).toBeInstanceOf(StateAccessError);
    expect(err?.message).toBe(
      'cannot write state file /mnt/backup/s.db: it is on a read-only file system, and SQLite writes /mnt/backup/s.db-wal ' +
        'and /mnt/backup/s.db-shm beside it even to read it; copy the file to a writable directory, or mount it read-write',
    );
  });

  it('in a directory the user cannot write: names the directory and the permission', () => {
    const err = stateAccessError(
      '/data/s.db',
      failingAccess('EACCES', (p) => p === '/data'),
    );
    expect(err?.message).toBe(
      'cannot write state file /data/s.db: permission denied on its directory /data, where SQLite writes ' +
        '/data/s.db-wal and /data/s.db-shm beside it; run as a user who may write there, or copy the file to a writable directory',
    );
  });

  it('a file the user cannot write: names the file', () => {
    const err = stateAccessError(
      '/data/s.db',
      failingAccess('EACCES', (p) => p === '/data/s.db'),
    );
    expect(err?.message).toBe(
      'cannot write state file /data/s.db: permission denied on the file; run as a user who may write it, or give it write permission',
    );
  });

  it('nothing to say when both can be written', () => {
    expect(stateAccessError('/data/s.db', () => undefined)).toBeNull();
  });
});
