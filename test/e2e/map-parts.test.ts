import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import { tempDir } from '../helpers/map-e2e-data.js';
import { runCli } from '../helpers/map-e2e-processes.js';

// A many-part export through `map --env local`: one run, one output, the rows of the single file.
const dir = tempDir('map-parts');
const HEADER = 'id,email,phone,zip';
let lines: string[];
let plainOut: string;
let exportDir: string;

function row(i: number): string {
  const email = i % 41 === 40 ? `broken-${i}` : `user.${i % 997}@example.com`;
  const phone = i % 3 === 0 ? '' : `+1617555${String(i % 10_000).padStart(4, '0')}`;
  return `${String(i).padStart(5, '0')},${email},${phone},0${i % 9}134`;
}

const MAP = ['--email-col', 'email', '--phone-col', 'phone', '--env', 'local', '--quiet'];

beforeAll(async () => {
  ensureBuilt();
  lines = Array.from({ length: 3000 }, (_, i) => row(i));
  const whole = dir.file('whole.csv', `${HEADER}\n${lines.join('\n')}\n`);
  exportDir = dir.file('export');
  mkdirSync(exportDir);
  for (let p = 0; p < 3; p++) {
    const part = lines.slice(p * 1000, (p + 1) * 1000);
    dir.file(join('export', `data_${p}_0_0.csv.gz`), gzipSync(`${HEADER}\n${part.join('\n')}\n`));
  }
  dir.file(join('export', '_SUCCESS'), '');
  plainOut = dir.file('whole-out.csv');
  const run = await runCli(['map', whole, ...MAP, '-o', plainOut, '--threads', '0']);
  expect(run.code).toBe(0);
}, 120_000);

afterAll(() => dir.remove());

describe('map over many inputs', () => {
  it.each([['0'], ['2']])(
    "a three-part gzip export by pattern maps as one run: the single file's output (--threads %s)",
    async (threads) => {
      const out = dir.file(`glob-${threads}.csv`);
      const pattern = join(exportDir, 'data_*_0_0.csv.gz');
      const run = await runCli(['map', pattern, ...MAP, '-o', out, '--threads', threads]);
      expect(run.stderr).toBe('');
      expect(run.code).toBe(0);
      expect(readFileSync(out, 'utf8')).toBe(readFileSync(plainOut, 'utf8'));
    },
  );

  it('a directory reads its parts in name order, leaving out _SUCCESS; the summary counts every part', async () => {
    const out = dir.file('dir.csv');
    const summary = dir.file('dir-summary.json');
    const run = await runCli(['map', exportDir, ...MAP, '-o', out, '--summary-json', summary]);
    expect(run.code).toBe(0);
    expect(readFileSync(out, 'utf8')).toBe(readFileSync(plainOut, 'utf8'));
    expect(JSON.parse(readFileSync(summary, 'utf8')).rows).toBe(3000);
  });

  it('files given one by one are read in the order given', async () => {
    const parts = [2, 0, 1].map((p) => join(exportDir, `data_${p}_0_0.csv.gz`));
    const run = await runCli(['map', ...parts, ...MAP]);
    expect(run.code).toBe(0);
    const ids = run.stdout
      .trim()
      .split('\n')
      .slice(1)
      .map((l) => Number(l.split(',')[0]));
    expect(ids.slice(0, 2)).toEqual([2000, 2001]);
    expect(ids[1000]).toBe(0);
    expect(ids.length).toBe(3000);
  });

  it('a pattern that matches nothing: exit 2, one line, no output', async () => {
    const out = dir.file('none.csv');
    const run = await runCli(['map', join(exportDir, 'part-*.parquet'), ...MAP, '-o', out]);
    expect(run.code).toBe(2);
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
    expect(run.stderr).toContain('matches no file');
    expect(existsSync(out)).toBe(false);
  });

  it('a part with other columns: exit 2 naming the part, before anything is sent, no output', async () => {
    const odd = dir.file('odd.csv', `id,mail,phone,zip\n${row(1)}\n`);
    const out = dir.file('mixed.csv');
    const run = await runCli(['map', join(exportDir, 'data_0_0_0.csv.gz'), odd, ...MAP, '-o', out]);
    expect(run.code).toBe(2);
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
    expect(run.stderr).toContain(`${odd}: its column 2 is 'mail' where the first part has 'email'`);
    expect(existsSync(out)).toBe(false);
  });

  it('a problem in a later part names that part and its line', async () => {
    const bad = dir.file('bad-part.csv', Buffer.from(`${HEADER}\n${row(5)}\n${row(6)}\xff\n`, 'latin1'));
    const run = await runCli(['map', join(exportDir, 'data_0_0_0.csv.gz'), bad, ...MAP, '-o', dir.file('x.csv')]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`${bad}: line 3: invalid UTF-8`);
  });
});

describe('map --output-dir', () => {
  it("writes one output per part, named as the part, holding that part's rows", async () => {
    const outDir = dir.file('out-dir');
    mkdirSync(outDir);
    const run = await runCli(['map', join(exportDir, 'data_*.csv.gz'), ...MAP, '--output-dir', outDir]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const whole = readFileSync(plainOut, 'utf8').trim().split('\n');
    for (let p = 0; p < 3; p++) {
      const text = gunzipSync(readFileSync(join(outDir, `data_${p}_0_0.csv.gz`))).toString('utf8');
      expect(text).toBe(`${[whole[0], ...whole.slice(1 + p * 1000, 1 + (p + 1) * 1000)].join('\n')}\n`);
    }
  });

  it('refuses an output directory that would overwrite the inputs, and -o with it', async () => {
    const intoInputs = await runCli(['map', join(exportDir, 'data_*.csv.gz'), ...MAP, '--output-dir', exportDir]);
    expect(intoInputs.code).toBe(2);
    expect(intoInputs.stderr).toContain('the run would overwrite what it reads');
    const both = await runCli([
      'map',
      join(exportDir, 'data_0_0_0.csv.gz'),
      ...MAP,
      '--output-dir',
      dir.path,
      '-o',
      dir.file('o.csv'),
    ]);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('either -o FILE or --output-dir DIR');
  });
});

describe('hash and optout-check over many inputs', () => {
  it('hash of a pattern gives the single file hashed', async () => {
    const whole = dir.file('whole.csv');
    const single = await runCli(['hash', whole, '--email-col', 'email', '--phone-col', 'phone', '--quiet']);
    const parts = await runCli([
      'hash',
      join(exportDir, 'data_*.csv.gz'),
      '--email-col',
      'email',
      '--phone-col',
      'phone',
      '--quiet',
    ]);
    expect(parts.code).toBe(0);
    expect(single.code).toBe(0);
    expect(parts.stdout).toBe(single.stdout);
  });

  it('hash --output-dir writes each part hashed beside its name', async () => {
    const outDir = dir.file('hash-dir');
    mkdirSync(outDir);
    const run = await runCli([
      'hash',
      exportDir,
      '--email-col',
      'email',
      '--phone-col',
      'phone',
      '--quiet',
      '--output-dir',
      outDir,
    ]);
    expect(run.code).toBe(0);
    const whole = await runCli(['hash', exportDir, '--email-col', 'email', '--phone-col', 'phone', '--quiet']);
    const lines = whole.stdout.trim().split('\n');
    const part1 = gunzipSync(readFileSync(join(outDir, 'data_1_0_0.csv.gz'))).toString('utf8');
    expect(part1).toBe(`${[lines[0], ...lines.slice(1001, 2001)].join('\n')}\n`);
  });

  it('optout-check of two parts gives the verdicts of the one file', async () => {
    const uids = readFileSync(plainOut, 'utf8')
      .trim()
      .split('\n')
      .slice(1)
      .map((l) => l.split(',')[4])
      .filter((u) => u !== '')
      .slice(0, 200);
    const one = dir.file('uids.csv', `raw_uid\n${uids.join('\n')}\n`);
    const a = dir.file('uids-a.csv', `raw_uid\n${uids.slice(0, 120).join('\n')}\n`);
    const b = dir.file('uids-b.csv', `raw_uid\n${uids.slice(120).join('\n')}\n`);
    const single = await runCli(['optout-check', one, '--env', 'local', '--quiet']);
    const parts = await runCli(['optout-check', a, b, '--env', 'local', '--quiet']);
    expect(single.code).toBe(0);
    expect(parts.code).toBe(0);
    expect(parts.stdout).toBe(single.stdout);
    expect(parts.stdout.trim().split('\n')).toHaveLength(201);
  });
});
