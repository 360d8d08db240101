import { readFileSync } from 'node:fs';
import { gunzipSync, gzipSync } from 'node:zlib';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import { tempDir } from '../helpers/map-e2e-data.js';
import { runCli } from '../helpers/map-e2e-processes.js';

// The same identifiers through `map --env local` from plain CSV, gzip and Parquet: the same output rows.
const dir = tempDir('formats');
let csv: string;
let input: string;
let plainOut: string;

/** Mixed rows: emails (some invalid), E.164 phones, ids and zips with leading zeros, a quoted note. */
function mixedRows(n: number): string {
  const lines = ['id,email,phone,zip,note'];
  for (let i = 0; i < n; i++) {
    const email = i % 41 === 40 ? `broken-${i}` : `user.${i % 997}@example.com`;
    const phone = i % 3 === 0 ? '' : `+1617555${String(i % 10_000).padStart(4, '0')}`;
    lines.push(`${String(i).padStart(5, '0')},${email},${phone},0${i % 9}134,"note, ${i}"`);
  }
  return `${lines.join('\n')}\n`;
}

const MAP = ['--email-col', 'email', '--phone-col', 'phone', '--env', 'local', '--quiet'];

beforeAll(async () => {
  ensureBuilt();
  csv = mixedRows(4000);
  input = dir.file('in.csv', csv);
  plainOut = dir.file('out.csv');
  const run = await runCli(['map', input, ...MAP, '-o', plainOut, '--threads', '0']);
  expect(run.code).toBe(0);
}, 120_000);

afterAll(() => dir.remove());

describe('map with compressed and Parquet data', () => {
  it.each([['0'], ['2']])(
    "a .csv.gz to .csv.gz gives the plain run's bytes, gzipped (--threads %s)",
    async (threads) => {
      const gzIn = dir.file(`in-${threads}.csv.gz`, gzipSync(csv));
      const gzOut = dir.file(`out-${threads}.csv.gz`);
      const run = await runCli(['map', gzIn, ...MAP, '-o', gzOut, '--threads', threads]);
      expect(run.stderr).toBe('');
      expect(run.code).toBe(0);
      expect(gunzipSync(readFileSync(gzOut)).toString('utf8')).toBe(readFileSync(plainOut, 'utf8'));
    },
  );

  it('gzip on stdin is recognised by its bytes', async () => {
    const run = await runCli(['map', '-', ...MAP, '--threads', '0'], { input: gzipSync(csv) });
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(readFileSync(plainOut, 'utf8'));
  });

  it('a Parquet export of the same table gives the same rows', async () => {
    const parquet = dir.file('in.parquet');
    const db = await DuckDBInstance.create(':memory:');
    const conn = await db.connect();
    await conn.run(
      `COPY (SELECT * FROM read_csv('${input}', all_varchar = true, header = true)) TO '${parquet}' (FORMAT parquet, ROW_GROUP_SIZE 1000)`,
    );
    conn.closeSync();
    db.closeSync();
    const out = dir.file('from-parquet.csv');
    const run = await runCli(['map', parquet, ...MAP, '-o', out]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(readFileSync(out, 'utf8')).toBe(readFileSync(plainOut, 'utf8'));
  });

  it('a truncated gzip ends in one line and exit 1, with no output file', async () => {
    const bytes = gzipSync(csv);
    const bad = dir.file('cut.csv.gz', bytes.subarray(0, bytes.length - 200));
    const out = dir.file('cut-out.csv');
    const run = await runCli(['map', bad, ...MAP, '-o', out, '--threads', '0']);
    expect(run.code).toBe(1);
    expect(run.stderr).toBe(
      `uid2-batch: ${bad}: the gzip data ends early (a truncated file?); copy or download it again, completely; ${out} was not written\n`,
    );
    expect(() => readFileSync(out)).toThrow();
  });

  it('a Parquet file with a corrupt footer ends in one line and exit 1', async () => {
    const good = readFileSync(dir.file('in.parquet'));
    const bad = dir.file('cut.parquet', good.subarray(0, good.length - 50));
    const run = await runCli(['map', bad, ...MAP]);
    expect(run.code).toBe(1);
    expect(run.stderr).toBe(
      `uid2-batch: ${bad}: not a readable Parquet file (its footer is missing or corrupt: a truncated copy?); copy or export it again\n`,
    );
  });
});
