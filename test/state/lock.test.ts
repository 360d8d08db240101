import { afterAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { StateLockedError } from '../../src/state/index.js';
import { tmpStates } from './tmp-state.js';

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
    const holder = JSON.parse(readFileSync(`${path}.lock`, 'utf8')) as { pid: number; startedAt: string };
    expect(holder.pid).toBe(process.pid);
    expect(statSync(`${path}.lock`).mode & 0o777).toBe(0o600);

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
        `wait for it or remove ${path}.lock if that process is gone`,
    );
    expect(second.locked).toBe(false);
    // the failed attempt did not disturb the holder's lock
    expect(JSON.parse(readFileSync(`${path}.lock`, 'utf8'))).toEqual(holder);
  });

  it('is released on close, and taking it twice in one store is harmless', () => {
    const path = t.file();
    const a = t.open(path);
    a.lock();
    a.lock();
    a.close();
    expect(existsSync(`${path}.lock`)).toBe(false);
    const b = t.open(path);
    b.lock();
    expect(b.locked).toBe(true);
  });

  it('takes over a lock whose process is gone', () => {
    const path = t.file();
    t.open(path).close();
    const pid = deadPid();
    writeFileSync(`${path}.lock`, JSON.stringify({ pid, startedAt: '2025-01-01T00:00:00.000Z' }));
    const s = t.open(path);
    s.lock();
    expect(JSON.parse(readFileSync(`${path}.lock`, 'utf8')).pid).toBe(process.pid);
    s.close();
    expect(existsSync(`${path}.lock`)).toBe(false);
  });

  it('takes over a lock file that is not one of ours (garbage content)', () => {
    const path = t.file();
    t.open(path).close();
    writeFileSync(`${path}.lock`, 'not json');
    const s = t.open(path);
    s.lock();
    expect(s.locked).toBe(true);
  });

  it('does not remove a lock that another run took over meanwhile', () => {
    const path = t.file();
    const s = t.open(path);
    s.lock();
    const other = JSON.stringify({ pid: process.pid, startedAt: 'later' });
    writeFileSync(`${path}.lock`, other);
    s.close();
    expect(readFileSync(`${path}.lock`, 'utf8')).toBe(other);
  });
});

describe('runs table', () => {
  it('records a run from start to finish, newest first', () => {
    const s = t.open(t.file());
    const first = s.startRun('map', '{"input":"in.csv"}', 1_000);
    s.finishRun(first, '{"rows":3}', 0, 1_010);
    const second = s.startRun('remap-due', '{}', 2_000);
    expect(second).toBeGreaterThan(first);
    expect(s.listRuns(10)).toEqual([
      {
        id: second,
        command: 'remap-due',
        args: '{}',
        startedAtS: 2_000,
        finishedAtS: null,
        summary: null,
        exitCode: null,
      },
      {
        id: first,
        command: 'map',
        args: '{"input":"in.csv"}',
        startedAtS: 1_000,
        finishedAtS: 1_010,
        summary: '{"rows":3}',
        exitCode: 0,
      },
    ]);
    expect(s.listRuns(1)).toHaveLength(1);
  });

  it('reports integrity ok on a sound file', () => {
    const s = t.open(t.file());
    expect(s.integrityCheck()).toBe('ok');
  });
});
