import { afterAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { existsSync, linkSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { StateLockedError } from '../../src/state/index.js';
import { StateLock, lockPathOf } from '../../src/state/lock.js';
import { runsOf, tmpStates } from './tmp-state.js';

const t = tmpStates();
afterAll(() => t.cleanup());

/** A pid that certainly belongs to no process: one that has just exited. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  return Number(child.stdout);
}

describe('lock', () => {
  it('lets one run lock the file; a second one fails fast naming the holder, the file and what to do', () => {
    const path = t.file();
    const first = t.open(path);
    first.lock();
    expect(first.locked).toBe(true);
    const holder = JSON.parse(readFileSync(lockPathOf(path), 'utf8')) as { pid: number; startedAt: string };
    expect(holder.pid).toBe(process.pid);
    expect(statSync(lockPathOf(path)).mode & 0o777).toBe(0o600);

    const second = t.open(path);
    let caught: unknown;
    try {
      second.lock();
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(StateLockedError);
    expect((caught as Error).message).toBe(
      `another uid2-batch run (pid ${process.pid}, started at ${holder.startedAt}) is using ${path}; ` +
        `wait for it or remove ${lockPathOf(path)} if that process is gone`,
    );
    expect(second.locked).toBe(false);
    // the failed attempt did not disturb the holder's lock
    expect(JSON.parse(readFileSync(lockPathOf(path), 'utf8'))).toEqual(holder);
  });

  it('is released on close, and taking it twice in one store is harmless', () => {
    const path = t.file();
    const a = t.open(path);
    a.lock();
    a.lock();
    a.close();
    expect(existsSync(lockPathOf(path))).toBe(false);
    const b = t.open(path);
    b.lock();
    expect(b.locked).toBe(true);
  });

  it('takes over a lock whose process is gone', () => {
    const path = t.file();
    t.open(path).close();
    const pid = deadPid();
    writeFileSync(lockPathOf(path), JSON.stringify({ pid, startedAt: '2025-01-01T00:00:00.000Z' }));
    const s = t.open(path);
    s.lock();
    expect(JSON.parse(readFileSync(lockPathOf(path), 'utf8')).pid).toBe(process.pid);
    s.close();
    expect(existsSync(lockPathOf(path))).toBe(false);
  });

  it('takes over a lock file that is not one of ours (garbage content)', () => {
    const path = t.file();
    t.open(path).close();
    writeFileSync(lockPathOf(path), 'not json');
    const s = t.open(path);
    s.lock();
    expect(s.locked).toBe(true);
  });

  it('does not remove a lock that another run took over meanwhile', () => {
    const path = t.file();
    const s = t.open(path);
    s.lock();
    const other = JSON.stringify({ pid: process.pid, startedAt: 'later' });
    writeFileSync(lockPathOf(path), other);
    s.close();
    expect(readFileSync(lockPathOf(path), 'utf8')).toBe(other);
  });
});

describe('lock by the file, not its name', () => {
  it('refuses a second run that reaches the file through a hard link or a symlink', () => {
    const path = t.file();
    t.open(path).close();
    // the holder takes the lock alone: SQLite itself refuses two names of one file in one process
    const holder = new StateLock(path);
    holder.acquire();
    const hard = t.file('hard-link.db');
    linkSync(path, hard);
    const soft = t.file('sym-link.db');
    symlinkSync(path, soft);
    try {
      for (const other of [hard, soft]) {
        const second = new StateLock(other);
        expect(() => second.acquire()).toThrow(
          /^another uid2-batch run \(pid \d+, started at .*\) is using .*; wait for it or remove .*\.lock if that process is gone$/,
        );
        expect(second.held).toBe(false);
      }
    } finally {
      holder.release();
    }
    // once the holder is gone, either name takes it
    const later = new StateLock(hard);
    later.acquire();
    expect(later.held).toBe(true);
    later.release();
  });
});

describe('runs table', () => {
  it('records a run from start to finish, newest first: its wall-clock start and the --now it was told', () => {
    const s = t.open(t.file());
    const before = Math.floor(Date.now() / 1000);
    const first = s.startRun('map', '{"input":"in.csv"}', 1_000);
    s.finishRun(first, '{"rows":3}', 0, 1_010);
    const second = s.startRun('remap-due', '{}', 2_000);
    const after = Math.floor(Date.now() / 1000);
    expect(second).toBeGreaterThan(first);
    const runs = runsOf(s.path);
    for (const run of runs) {
      expect(run.startedAtS).toBeGreaterThanOrEqual(before);
      expect(run.startedAtS).toBeLessThanOrEqual(after);
    }
    expect(runs.map(({ startedAtS: _, ...rest }) => rest)).toEqual([
      { id: second, command: 'remap-due', args: '{}', nowS: 2_000, finishedAtS: null, summary: null, exitCode: null },
      {
        id: first,
        command: 'map',
        args: '{"input":"in.csv"}',
        nowS: 1_000,
        finishedAtS: 1_010,
        summary: '{"rows":3}',
        exitCode: 0,
      },
    ]);
  });
});
