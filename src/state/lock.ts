import {
  closeSync,
  linkSync,
  openSync,
  readFileSync,
  realpathSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';
import { errnoOf } from './access.js';
import { StateLockedError } from './errors.js';

/**
 * The lock of a state file, named by the file's device and inode in the directory that really holds it, so that
 * every name of one file (a symlink, a hard link) meets the same lock.
 */
export function lockPathOf(statePath: string): string {
  try {
    const { dev, ino } = statSync(statePath, { bigint: true });
    return join(dirname(realpathSync(statePath)), `uid2-batch-state-${dev}-${ino}.lock`);
  } catch {
    // no file (yet) to name it by: the path is all there is
    return `${statePath}.lock`;
  }
}

/**
 * One writing run's lock on a state file (SQLite's guard single transactions): a file holding the pid and start
 * time of its holder. A lock whose process is gone is stale and is taken over.
 */
export class StateLock {
  private content: string | null = null;
  private readonly onExit = (): void => this.release();
  // named by the state file, which exists by now
  private readonly lockPath: string;

  constructor(private readonly statePath: string) {
    this.lockPath = lockPathOf(statePath);
  }

  get held(): boolean {
    return this.content !== null;
  }

  acquire(): void {
    if (this.content !== null) return;
    const content = JSON.stringify({ pid: process.pid, startedAt: new Date().toISOString() });
    // a few rounds: each one either takes the lock, finds a live holder, or clears a stale lock and retries
    for (let round = 0; round < 5; round++) {
      if (this.tryCreate(content)) {
        this.content = content;
        process.on('exit', this.onExit);
        return;
      }
      const existing = readOrNull(this.lockPath);
      if (existing === null) continue;
      const holder = parseHolder(existing);
      if (holder !== null && isAlive(holder.pid)) {
        throw new StateLockedError(this.statePath, this.lockPath, holder.pid, holder.startedAt);
      }
      this.clearStale(existing);
    }
    throw new StateLockedError(this.statePath, this.lockPath, null, null);
  }

  release(): void {
    if (this.content === null) return;
    process.removeListener('exit', this.onExit);
    if (readOrNull(this.lockPath) === this.content) {
      try {
        unlinkSync(this.lockPath);
      } catch {
        // already gone: nothing to release
      }
    }
    this.content = null;
  }

  /** Creates the lock with its content in one step (a hard link of a private file): never seen empty. */
  private tryCreate(content: string): boolean {
    const tmp = `${this.lockPath}.${process.pid}.${randomBytes(6).toString('hex')}`;
    const fd = openSync(tmp, 'wx', 0o600);
    try {
      writeSync(fd, content);
    } finally {
      closeSync(fd);
    }
    try {
      linkSync(tmp, this.lockPath);
      return true;
    } catch (err) {
      if (errnoOf(err) === 'EEXIST') return false;
      throw err;
    } finally {
      unlinkSync(tmp);
    }
  }

  /** Moves the stale lock aside; if another run took it over in between, its fresh lock is put back. */
  private clearStale(staleContent: string): void {
    const aside = `${this.lockPath}.stale.${process.pid}.${randomBytes(6).toString('hex')}`;
    try {
      renameSync(this.lockPath, aside);
    } catch (err) {
      if (errnoOf(err) === 'ENOENT') return;
      throw err;
    }
    if (readOrNull(aside) !== staleContent) {
      try {
        linkSync(aside, this.lockPath);
      } catch {
        // a third run has created a lock meanwhile; it wins
      }
    }
    unlinkSync(aside);
  }
}

function readOrNull(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return null;
    throw err;
  }
}

function parseHolder(content: string): { pid: number; startedAt: string } | null {
  try {
    // null, a number or a string has no pid
    const { pid, startedAt } = (JSON.parse(content) ?? {}) as Record<string, unknown>;
    if (typeof pid !== 'number' || !Number.isInteger(pid) || pid <= 0) return null;
    return { pid, startedAt: typeof startedAt === 'string' ? startedAt : 'an unknown time' };
  } catch {
    return null;
  }
}

/** Signal 0 only asks whether the process exists; EPERM means it does, under another user. */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return errnoOf(err) !== 'ESRCH';
  }
}
