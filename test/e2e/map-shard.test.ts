// `map --shard K/N` through the built CLI: the runners' outputs put end to end in K order are one runner's output.
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import { tempDir } from '../helpers/map-e2e-data.js';
import { runCli, serveConnection, spawnCli, startServe, type ServeProcess } from '../helpers/map-e2e-processes.js';

const dir = tempDir('map-shard');
let input: string;
let wholeOut: string;
let wholeRejects: string;

const MAP = ['--email-col', 'email', '--env', 'local', '--quiet'];

/** Rows with quoted line breaks, CRLF and LF line ends, invalid emails and repeats. */
function rowsText(): string {
  const lines = ['id,email,note'];
  for (let i = 0; i < 400; i++) {
    const email = i % 37 === 36 ? `broken-${i}` : `user.${i % 311}@example.com`;
    const note = i % 5 === 0 ? `"line one\r\nline ""two"", ${i}"` : `n${i}`;
    lines.push(`${i},${email},${note}${i % 3 === 0 ? '\r' : ''}`);
  }
  return `${lines.join('\n')}\n`;
}

beforeAll(async () => {
  ensureBuilt();
  input = dir.file('rows.csv', rowsText());
  wholeOut = dir.file('whole.csv');
  wholeRejects = dir.file('whole-rejects.csv');
  const run = await runCli(['map', input, ...MAP, '-o', wholeOut, '--rejects', wholeRejects]);
  expect(run.stderr).toBe('');
  expect(run.code).toBe(0);
}, 120_000);

afterAll(() => dir.remove());

async function shardOutputs(count: number, threads: string): Promise<{ out: string; rejects: string }> {
  let out = '';
  let rejects = '';
  for (let index = 0; index < count; index++) {
    const o = dir.file(`out-${threads}-${index}-${count}.csv`);
    const r = dir.file(`rejects-${threads}-${index}-${count}.csv`);
    const run = await runCli([
      'map',
      input,
      ...MAP,
      '--threads',
      threads,
      '--shard',
      `${index}/${count}`,
      '-o',
      o,
      '--rejects',
      r,
    ]);
    expect(run.stderr).toBe('');
    expect([0, 3]).toContain(run.code);
    const share = readFileSync(o, 'utf8');
    // every runner has a share of these 400 rows: the work is spread, not left to runner 1
    expect(share.split('\n').length).toBeGreaterThan(400 / count / 2);
    out += share;
    rejects += readFileSync(r, 'utf8');
  }
  return { out, rejects };
}

describe('map --shard K/N', () => {
  it.each([
    [2, '2'],
    [3, '0'],
    [4, '2'],
  ])(
    '%i runners (--threads %s): outputs and rejects end to end are the one-runner files',
    async (count, threads) => {
      const { out, rejects } = await shardOutputs(count, threads);
      expect(out).toBe(readFileSync(wholeOut, 'utf8'));
      expect(rejects).toBe(readFileSync(wholeRejects, 'utf8'));
    },
    120_000,
  );

  describe('three runners at once against one service', () => {
    let serve: ServeProcess;
    beforeAll(async () => {
      serve = await startServe();
    }, 60_000);
    afterAll(async () => {
      await serve.stop();
    });

    it('their outputs end to end are one runner output against the same service', async () => {
      const { args, env } = serveConnection(serve);
      const flags = ['--email-col', 'email', '--quiet', ...args];
      const one = dir.file('serve-one.csv');
      expect((await runCli(['map', input, ...flags, '-o', one], { env })).code).toBe(0);
      const outs = [1, 2, 3].map((k) => dir.file(`serve-${k}.csv`));
      const runs = outs.map((o, k) => spawnCli(['map', input, ...flags, '--shard', `${k}/3`, '-o', o], { env }));
      const results = await Promise.all(runs.map((r) => r.done));
      for (const r of results) expect(r.stderr).toBe('');
      expect(outs.map((o) => readFileSync(o, 'utf8')).join('')).toBe(readFileSync(one, 'utf8'));
    }, 120_000);
  });

  it.each(['3/2', '3/3', '1/0', '-1/3', 'a/b', '2'])(
    'a bad spec %s is one line with the usage exit code, before the input is opened',
    async (spec) => {
      const run = await runCli(['map', dir.file('missing.csv'), ...MAP, '--shard', spec]);
      expect(run.code).toBe(2);
      expect(run.stdout).toBe('');
      expect(run.stderr.trim().split('\n')).toHaveLength(1);
      expect(run.stderr).toMatch(/--shard/);
      expect(run.stderr).toMatch(/K\/N/);
    },
  );

  it('gzipped outputs put end to end are a gzip file of the one-runner text', async () => {
    const gz = [1, 2].map((k) => dir.file(`out-${k}.csv.gz`));
    for (const [k, o] of gz.entries()) {
      const run = await runCli(['map', input, ...MAP, '--shard', `${k}/2`, '-o', o]);
      expect(run.code).toBe(0);
    }
    const joined = Buffer.concat(gz.map((o) => readFileSync(o)));
    expect(gunzipSync(joined).toString('utf8')).toBe(readFileSync(wholeOut, 'utf8'));
  }, 60_000);

  it('a single gzip file is refused with a line that says to unload in parts', async () => {
    const gz = dir.file('rows.csv.gz', gzipSync(readFileSync(input)));
    const run = await runCli(['map', gz, ...MAP, '--shard', '1/2']);
    expect(run.code).toBe(2);
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
    expect(run.stderr).toMatch(/gzip.*unload the table in parts/);
  });

  it('a Parquet output is refused: Parquet files cannot be put end to end', async () => {
    const run = await runCli(['map', input, ...MAP, '--shard', '1/2', '-o', dir.file('out.parquet')]);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/--shard with a Parquet output/);
  });

  it('--output-dir with several parts: each runner writes its own parts, together every part as one run writes it', async () => {
    const partsDir = dir.file('dir-parts');
    mkdirSync(partsDir);
    for (let p = 0; p < 5; p++) writeFileSync(join(partsDir, `data_${p}.csv`), `email\nd${p}@example.com\nbad-${p}\n`);
    const oneDir = dir.file('dir-one');
    const sharedDir = dir.file('dir-shared');
    mkdirSync(oneDir);
    mkdirSync(sharedDir);
    expect((await runCli(['map', partsDir, ...MAP, '--output-dir', oneDir])).code).toBe(0);
    const runs = [0, 1, 2].map((k) =>
      spawnCli(['map', partsDir, ...MAP, '--output-dir', sharedDir, '--shard', `${k}/3`]),
    );
    for (const r of await Promise.all(runs.map((run) => run.done))) expect(r.code, r.stderr).toBe(0);
    const names = readdirSync(oneDir).sort();
    expect(names).toHaveLength(5);
    expect(readdirSync(sharedDir).sort()).toEqual(names);
    for (const name of names)
      expect(readFileSync(join(sharedDir, name), 'utf8')).toBe(readFileSync(join(oneDir, name), 'utf8'));
    const single = await runCli(['map', input, ...MAP, '--output-dir', sharedDir, '--shard', '1/2']);
    expect(single.code).toBe(2);
    expect(single.stderr).toMatch(/--shard with --output-dir needs several input parts/);
  }, 60_000);

  it('several parts, fewer than the runners: each runner takes whole parts, end to end the one-runner output', async () => {
    const parts = [0, 1].map((p) => dir.file(`part-${p}.csv`, `email\np${p}a@example.com\np${p}b@example.com\n`));
    const one = await runCli(['map', ...parts, ...MAP]);
    expect(one.code).toBe(0);
    let joined = '';
    for (let k = 0; k < 3; k++) {
      const run = await runCli(['map', ...parts, ...MAP, '--shard', `${k}/3`]);
      expect(run.code).toBe(0);
      joined += run.stdout;
    }
    expect(joined).toBe(one.stdout);
  }, 60_000);
});
