import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, ROOT } from '../helpers/map-e2e-build.js';
import { tempDir } from '../helpers/map-e2e-data.js';
import { runCli } from '../helpers/map-e2e-processes.js';
import { usePostgres } from '../helpers/postgres.js';

// The commands with --state given a PostgreSQL URL, against the local service and a server this file starts.

const pg = usePostgres();
const dir = tempDir('state-postgres');
const CUSTOMERS = join(ROOT, 'samples', 'customers.csv');

beforeAll(() => ensureBuilt(), 120_000);
afterAll(() => dir.remove());

interface Summary {
  requests: number;
  from_state: number;
  mapped: number;
}

async function map(state: string, name: string): Promise<{ summary: Summary; output: string; stderr: string }> {
  const out = join(dir.path, `${name}.csv`);
  const summaryPath = join(dir.path, `${name}.json`);
  const r = await runCli([
    'map',
    CUSTOMERS,
    '--env',
    'local',
    '--state',
    state,
    '-o',
    out,
    '--summary-json',
    summaryPath,
  ]);
  expect(r.code, r.stderr).toBe(0);
  const summaryText = readFileSync(summaryPath, 'utf8');
  expect(summaryText).not.toContain(pg.server().password);
  return { summary: JSON.parse(summaryText) as Summary, output: readFileSync(out, 'utf8'), stderr: r.stderr };
}

async function exported(state: string): Promise<string> {
  const r = await runCli(['state', 'export', state, '--format', 'jsonl']);
  expect(r.code, r.stderr).toBe(0);
  return r.stdout;
}

describe('a PostgreSQL state', { timeout: 120_000 }, () => {
  it('map twice sends only what is new, and writes the same output as with a file; info and export read it', async () => {
    const url = pg.schemaUrl();
    const first = await map(url, 'db-1');
    expect(first.summary.requests).toBeGreaterThan(0);
    expect(first.summary.from_state).toBe(0);
    const second = await map(url, 'db-2');
    expect(second.summary.requests).toBe(0);
    expect(second.summary.from_state).toBeGreaterThan(0);
    expect(second.output).toBe(first.output);
    for (const run of [first, second]) expect(run.stderr).not.toContain(pg.server().password);

    const file = join(dir.path, 'same.db');
    const withFile = await map(file, 'file-1');
    expect(withFile.output).toBe(first.output);

    const info = await runCli(['state', 'info', url, '--json']);
    expect(info.code, info.stderr).toBe(0);
    expect(info.stdout).not.toContain(pg.server().password);
    const [dbInfo, fileInfo] = [info.stdout, (await runCli(['state', 'info', file, '--json'])).stdout].map(
      (text) => JSON.parse(text) as Record<string, unknown>,
    );
    expect(dbInfo.size_bytes).toBeNull();
    expect(dbInfo.path).toBe(url.replace(`:${pg.server().password}@`, '@'));
    for (const key of ['entries', 'status', 'due', 'no_refresh_time', 'environment', 'api'])
      expect(dbInfo[key], key).toEqual(fileInfo[key]);
    const human = await runCli(['state', 'info', url]);
    expect(human.stdout.split('\n')[0]).toBe(`state ${dbInfo.path}`);

    const lines = (text: string): string[] => text.trim().split('\n').sort();
    expect(lines(await exported(url))).toEqual(lines(await exported(file)));
  });

  it('state copy takes a file into a database and back, and the exports are byte for byte the same', async () => {
    const file = join(dir.path, 'source.db');
    await map(file, 'copy-source');
    const url = pg.schemaUrl();
    const there = await runCli(['state', 'copy', file, url, '--json']);
    expect(there.code, there.stderr).toBe(0);
    expect(there.stdout).not.toContain(pg.server().password);
    expect(JSON.parse(there.stdout)).toMatchObject({ complete: false, resumed: false, changes: 0 });
    const back = join(dir.path, 'back.db');
    const r = await runCli(['state', 'copy', url, back]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).not.toContain(pg.server().password);
    const source = await exported(file);
    expect(await exported(url)).toBe(source);
    expect(await exported(back)).toBe(source);

    const again = await runCli(['state', 'copy', file, url]);
    expect(again.stderr).toMatch(/is already a complete copy of/);
    // a map of the copy sends nothing: every identifier is answered from the database
    expect((await map(url, 'from-copy')).summary.requests).toBe(0);
  });

  it('refuses map --api v2 and an unreachable database in one line, without the password', async () => {
    const v2 = await runCli([
      'map',
      CUSTOMERS,
      '--env',
      'local',
      '--api',
      'v2',
      '--state',
      pg.schemaUrl(),
      '-o',
      join(dir.path, 'v2.csv'),
    ]);
    expect(v2.code).toBe(2);
    expect(v2.stderr).toMatch(/^uid2-batch: map --api v2 keeps its state in a file[^\n]*\n$/m);
    expect(v2.stderr).not.toContain(pg.server().password);
    const closed = `postgres://batch:${pg.server().password}@127.0.0.1:1/uid2?schema=a`;
    const down = await runCli(['state', 'info', closed]);
    expect(down.code).not.toBe(0);
    expect(down.stderr.trim().split('\n')).toHaveLength(1);
    expect(down.stderr).not.toContain(pg.server().password);
  });
});

describe('remap-due on a PostgreSQL state', { timeout: 120_000 }, () => {
  it('re-maps what is due as it does on a file: the same counts and the same changes', async () => {
    const url = pg.schemaUrl();
    const file = join(dir.path, 'remap.db');
    await map(url, 'remap-db-map');
    await map(file, 'remap-file-map');
    const at = '2031-01-01T00:00:00Z';
    const remap = async (state: string, name: string) => {
      const dry = await runCli(['remap-due', '--env', 'local', '--state', state, '--now', at, '--dry-run']);
      expect(dry.code, dry.stderr).toBe(0);
      const out = join(dir.path, `${name}.csv`);
      const summaryPath = join(dir.path, `${name}.json`);
      const r = await runCli([
        'remap-due',
        '--env',
        'local',
        '--state',
        state,
        '--now',
        at,
        '-o',
        out,
        '--summary-json',
        summaryPath,
      ]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).not.toContain(pg.server().password);
      const rows = readFileSync(out, 'utf8').trim().split('\n');
      return {
        dry: dry.stderr,
        rows: [rows[0], ...rows.slice(1).sort()],
        summary: JSON.parse(readFileSync(summaryPath, 'utf8')) as { rows: number; status: unknown },
      };
    };
    const db = await remap(url, 'remap-db');
    const fromFile = await remap(file, 'remap-file');
    expect(db.summary.rows).toBeGreaterThan(0);
    expect(db.summary.rows).toBe(fromFile.summary.rows);
    expect(db.summary.status).toEqual(fromFile.summary.status);
    expect(db.rows).toEqual(fromFile.rows);
    expect(db.dry).toBe(fromFile.dry);
    const info = JSON.parse((await runCli(['state', 'info', url, '--json'])).stdout) as {
      last_run: { command: string };
    };
    expect(info.last_run.command).toBe('remap-due');
  });
});

describe('optout-check --state on a PostgreSQL state', { timeout: 120_000 }, () => {
  it('checks every stored raw UID as it does on a file: the same rows and counts', async () => {
    const url = pg.schemaUrl();
    const file = join(dir.path, 'sweep.db');
    await map(url, 'sweep-db-map');
    await map(file, 'sweep-file-map');
    const sweep = async (state: string, name: string) => {
      const out = join(dir.path, `${name}.csv`);
      const summaryPath = join(dir.path, `${name}.json`);
      const r = await runCli([
        'optout-check',
        '--env',
        'local',
        '--state',
        state,
        '-o',
        out,
        '--summary-json',
        summaryPath,
      ]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).not.toContain(pg.server().password);
      const summaryText = readFileSync(summaryPath, 'utf8');
      expect(summaryText).not.toContain(pg.server().password);
      const rows = readFileSync(out, 'utf8').trim().split('\n');
      const summary = JSON.parse(summaryText) as Record<string, unknown>;
      return { rows: [rows[0], ...rows.slice(1).sort()], summary };
    };
    const db = await sweep(url, 'sweep-db');
    const fromFile = await sweep(file, 'sweep-file');
    expect(db.rows.length).toBeGreaterThan(1);
    expect(db.rows).toEqual(fromFile.rows);
    for (const key of ['entries_planned', 'entries_checked', 'tombstoned', 'status'])
      expect(db.summary[key], key).toEqual(fromFile.summary[key]);
    expect(db.summary.state_file).toBe(url.replace(`:${pg.server().password}@`, '@'));
  });
});

describe('UID2_BATCH_STATE', { timeout: 120_000 }, () => {
  it('names the state of map and remap-due when --state is not given', async () => {
    const env = { UID2_BATCH_STATE: pg.schemaUrl() };
    const run = (args: string[]) => runCli(args, { env });
    const summaries: Summary[] = [];
    for (const name of ['env-1', 'env-2']) {
      const summaryPath = join(dir.path, `${name}.json`);
      const r = await run([
        'map',
        CUSTOMERS,
        '--env',
        'local',
        '-o',
        join(dir.path, `${name}.csv`),
        '--summary-json',
        summaryPath,
      ]);
      expect(r.code, r.stderr).toBe(0);
      summaries.push(JSON.parse(readFileSync(summaryPath, 'utf8')) as Summary);
    }
    expect(summaries[0].requests).toBeGreaterThan(0);
    expect(summaries[1].requests).toBe(0);
    const dry = await run(['remap-due', '--env', 'local', '--now', '2031-01-01T00:00:00Z', '--dry-run']);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stderr).toMatch(/entries due now/);
  });
});

describe('what only a state file has', { timeout: 120_000 }, () => {
  it('refuses a database URL in one line, exit 2, without the password', async () => {
    const url = `postgres://batch:${pg.server().password}@127.0.0.1:1/uid2?schema=a`;
    const shown = 'postgres://batch@127.0.0.1:1/uid2?schema=a';
    const cases: [string[], string][] = [
      [['state', 'checkpoint', url], 'state checkpoint works on a state file, not a database'],
      [['state', 'vacuum', url], 'state vacuum works on a state file, not a database'],
      [['migrate', '--env', 'local', '--state', url], 'migrate works on a state file, not a database'],
    ];
    for (const [args, start] of cases) {
      const r = await runCli(args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toMatch(
        new RegExp(`^uid2-batch: ${start} \\(${shown.replace(/[?.]/g, '\\$&')}\\); [^\\n]+\\n$`),
      );
      expect(r.stderr).not.toContain(pg.server().password);
    }
  });
});
