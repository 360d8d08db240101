import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { writeWithHotJournal } from '../helpers/hot-journal.js';
import { lockPathOf } from '../../src/state/lock.js';
import Database from '../helpers/sqlite-driver.js';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, ensureBuilt, ROOT } from '../helpers/map-e2e-build.js';
import { tempDir } from '../helpers/map-e2e-data.js';
import { cleanEnv, runCli } from '../helpers/map-e2e-processes.js';

// `uid2-batch state info|export|checkpoint|vacuum` on a state file made by a real map run.

const dir = tempDir('state-command');
let statePath = '';
let entries = 0;

beforeAll(async () => {
  ensureBuilt();
  statePath = join(dir.path, 'customers.db');
  const r = await runCli([
    'map',
    join(ROOT, 'samples', 'customers.csv'),
    '--env',
    'local',
    '--state',
    statePath,
    '-o',
    join(dir.path, 'mapped.csv'),
    '-q',
  ]);
  if (r.code !== 0) throw new Error(r.stderr);
  const db = new Database(statePath, { readonly: true });
  entries = db.prepare('SELECT COUNT(*) FROM entries').pluck().get() as number;
  db.close();
}, 120_000);
afterAll(() => dir.remove());

describe('state info', () => {
  it('counts entries by status and due date, with schema, environment and size', async () => {
    const r = await runCli(['state', 'info', statePath, '--json']);
    expect(r.code, r.stderr).toBe(0);
    const info = JSON.parse(r.stdout) as {
      entries: number;
      status: Record<'mapped' | 'optout' | 'invalid', number>;
      environment: string;
      api: string;
      schema_version: number;
      size_bytes: { file: number };
      due: { now: number; within_365_days: number; later: number };
      no_refresh_time: number;
      last_run: unknown;
    };
    expect(info.entries).toBe(entries);
    expect(info.status.mapped + info.status.optout + info.status.invalid).toBe(entries);
    expect(info.status.optout).toBeGreaterThan(0);
    expect(info.environment).toContain('local');
    expect(info.api).toBe('v3');
    expect(info.schema_version).toBeGreaterThan(0);
    expect(info.size_bytes.file).toBe(statSync(statePath).size);
    expect(info.due.now + info.due.within_365_days + info.due.later + info.no_refresh_time).toBe(entries);
    expect(info.last_run).toMatchObject({ command: 'map', exit_code: 0 });
    const human = await runCli(['state', 'info', statePath]);
    expect(human.stdout).toMatch(/entries: .* mapped, .* optout, .* invalid/);
  });

  it('a file with a rollback journal a killed run left: exit 2, naming it and what to do', async () => {
    const copy = join(dir.path, 'journal.db');
    writeWithHotJournal(join(dir.path, 'journal-source.db'), copy);
    const r = await runCli(['state', 'info', copy]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      `uid2-batch: state file ${copy} has a rollback journal (${copy}-journal) left by a run that was killed ` +
        `while it wrote; a command that writes the file rolls it back (uid2-batch state checkpoint ${copy}), ` +
        'then read it again\n',
    );
  });

  it('a file that is not a state file: exit 2, one line', async () => {
    const r = await runCli(['state', 'info', join(ROOT, 'samples', 'customers.csv')]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^uid2-batch: '.*customers\.csv' is not a uid2-batch state file/);
  });
});

describe('the state file memory map setting', () => {
  it('a map run with UID2_BATCH_STATE_MMAP_MIB that is not a whole number: exit 2, one line, nothing written', async () => {
    const fresh = join(dir.path, 'mmap-refused.db');
    const out = join(dir.path, 'mmap-refused.csv');
    const r = await runCli(
      ['map', join(ROOT, 'samples', 'customers.csv'), '--env', 'local', '--state', fresh, '-o', out, '-q'],
      { env: { UID2_BATCH_STATE_MMAP_MIB: '2GiB' } },
    );
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      'uid2-batch: UID2_BATCH_STATE_MMAP_MIB must be a whole number of MiB of the state file to map into memory ' +
        '(0 maps none), not "2GiB"\n',
    );
    expect(existsSync(out)).toBe(false);
    expect(existsSync(fresh)).toBe(false);
    // 0 reads the file without the map, to the same answers
    const plain = await runCli(
      ['map', join(ROOT, 'samples', 'customers.csv'), '--env', 'local', '--state', statePath, '-o', out, '-q'],
      { env: { UID2_BATCH_STATE_MMAP_MIB: '0' } },
    );
    expect(plain.code, plain.stderr).toBe(0);
    expect(readFileSync(out, 'utf8')).toBe(readFileSync(join(dir.path, 'mapped.csv'), 'utf8'));
  });
});

describe('state export', () => {
  it('writes every entry with hashes, raw UIDs, r and status, and no email or phone', async () => {
    const out = join(dir.path, 'export.csv');
    const r = await runCli(['state', 'export', statePath, '-o', out]);
    expect(r.code, r.stderr).toBe(0);
    const text = readFileSync(out, 'utf8');
    const rows = parse(text, { columns: true }) as Record<string, string>[];
    expect(rows).toHaveLength(entries);
    expect(Object.keys(rows[0])).toEqual(['hash_type', 'hash', 'status', 'raw_uid', 'prev_raw_uid', 'refresh_from']);
    expect(text).not.toContain('@');
    expect(
      rows.filter((x) => x.status === 'mapped').every((x) => x.raw_uid.length === 44 && Number(x.refresh_from) > 0),
    ).toBe(true);
    const jsonl = await runCli(['state', 'export', statePath, '--format', 'jsonl']);
    expect(jsonl.stdout.trim().split('\n')).toHaveLength(entries);
  });

  it('refuses to export over the state file itself', async () => {
    const r = await runCli(['state', 'export', statePath, '-o', statePath]);
    expect(r.code).toBe(2);
  });
});

describe('state copy', () => {
  it('copies a state file into a new one: the same export, one summary line, --json for a machine', async () => {
    const copy = join(dir.path, 'copy.db');
    const r = await runCli(['state', 'copy', statePath, copy]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toBe(
      `state copy: ${entries.toLocaleString('en-US')} entries and 0 pending changes copied from ${statePath} to ${copy}\n`,
    );
    const exports = await Promise.all(
      [statePath, copy].map((p) => runCli(['state', 'export', p, '--format', 'jsonl'])),
    );
    expect(exports[1].stdout).toBe(exports[0].stdout);
    const again = await runCli(['state', 'copy', statePath, copy, '--json']);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toEqual({
      source: statePath,
      destination: copy,
      entries: 0,
      changes: 0,
      resumed: false,
      complete: true,
    });
  });

  it('refuses to copy a state onto itself, exit 2 and one line', async () => {
    const r = await runCli(['state', 'copy', statePath, statePath]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      `uid2-batch: state copy: the source and the destination are the same state (${statePath}); give another destination\n`,
    );
  });
});

describe('state checkpoint and vacuum', () => {
  it('checkpoint empties a WAL that a writer left, so that the file alone is complete', async () => {
    // a writer that keeps its connection open and never checkpoints: its commits stay in the -wal file
    const writer = new Database(statePath);
    writer.pragma('wal_autocheckpoint = 0');
    for (let i = 0; i < 200; i++)
      writer
        .prepare("INSERT OR REPLACE INTO meta (key, value, sum) VALUES ('test_note', ?, 0)")
        .run('x'.repeat(2_000) + i);
    const walBefore = statSync(`${statePath}-wal`).size;
    expect(walBefore).toBeGreaterThan(100_000);
    const r = await runCli(['state', 'checkpoint', statePath]);
    writer.close();
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/WAL .* -> 0 B/);
  });

  it('waits for the lock with --wait, and fails at once without it', async () => {
    const lockPath = lockPathOf(statePath);
    // a live process holds the lock: a child started and stopped by this test
    const holder = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
    try {
      writeFileSync(lockPath, JSON.stringify({ pid: holder.pid, startedAt: new Date().toISOString() }));
      const refused = await runCli(['state', 'vacuum', statePath]);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toMatch(/is using .*customers\.db/);
      const waiting = spawn(process.execPath, [BIN, 'state', 'vacuum', statePath, '--wait', '20'], {
        cwd: ROOT,
        env: cleanEnv(),
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let stderr = '';
      waiting.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
      await new Promise((resolve) => setTimeout(resolve, 700));
      expect(waiting.exitCode).toBeNull();
      unlinkSync(lockPath);
      const [code] = (await once(waiting, 'exit')) as [number];
      expect(code, stderr).toBe(0);
      expect(stderr).toMatch(/^state vacuum .*: file .* -> /);
    } finally {
      process.kill(holder.pid as number, 'SIGTERM');
    }
  });
});
