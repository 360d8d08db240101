import { readFileSync, writeFileSync } from 'node:fs';
import { parquetMetadata } from 'hyparquet';
import { gunzipSync, gzipSync } from 'node:zlib';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSource } from '../../src/pipeline/io/source.js';
import type { TableSource } from '../../src/pipeline/io/table.js';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import { tempDir } from '../helpers/map-e2e-data.js';
import { runCli } from '../helpers/map-e2e-processes.js';
import { settled } from '../helpers/settled-reading.js';

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

/** Runs SQL in a fresh in-memory DuckDB: an independent Parquet reader and writer. */
async function duck(sql: string): Promise<unknown[][]> {
  const db = await DuckDBInstance.create(':memory:');
  const conn = await db.connect();
  try {
    return (await conn.runAndReadAll(sql)).getRows();
  } finally {
    conn.closeSync();
    db.closeSync();
  }
}

/** A Parquet copy of a CSV file, every column a string, in row groups of 1,000. */
async function parquetOf(csvPath: string, name: string): Promise<string> {
  const path = dir.file(name);
  await duck(
    `COPY (SELECT * FROM read_csv('${csvPath}', all_varchar = true, header = true)) TO '${path}' (FORMAT parquet, ROW_GROUP_SIZE 1000)`,
  );
  return path;
}

/** A table as this tool reads it (any format): header and cells, nulls read as empty cells. */
async function table(path: string): Promise<{ header: string[]; rows: string[][] }> {
  const source: TableSource = await openSource(await settled({ path }));
  const rows: string[][] = [];
  for await (const chunk of source.rows()) for (const r of chunk) rows.push(r.cells);
  return { header: source.header, rows };
}

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

describe('a Parquet file with a corrupt row group', () => {
  // the reading thread decodes a Parquet-to-Parquet run's groups with another decoder than a run to CSV: a
  // group that decoder cannot read must end either run in the same words, with no output left behind
  it.each([['out.csv'], ['out.parquet']])('ends in one line and exit 1, naming its rows (-o %s)', async (name) => {
    const bytes = new Uint8Array(readFileSync(await parquetOf(input, `groups-${name}.parquet`)));
    const meta = parquetMetadata(bytes.buffer);
    const email = meta.row_groups[1].columns[1].meta_data;
    const start = Number(email?.dictionary_page_offset ?? email?.data_page_offset);
    bytes.fill(0xff, start, start + Number(email?.total_compressed_size));
    const bad = dir.file(`corrupt-group-${name}.parquet`);
    writeFileSync(bad, bytes);
    const out = dir.file(`corrupt-group-${name}`);
    const run = await runCli(['map', bad, ...MAP, '-o', out]);
    expect(run.code).toBe(1);
    expect(run.stderr.split('\n').filter((line) => line !== '')).toHaveLength(1);
    const first = Number(meta.row_groups[0].num_rows) + 1;
    const last = first + Number(meta.row_groups[1].num_rows) - 1;
    expect(run.stderr).toBe(
      `uid2-batch: ${bad}: the row group holding rows ${first} to ${last} cannot be decoded (corrupt data?); export it again, with SNAPPY, ZSTD or GZIP compression; ${out} was not written\n`,
    );
    expect(() => readFileSync(out)).toThrow();
  });
});

describe('--delimiter tab', () => {
  it('a tab-separated input reads as its comma-separated twin: map with row threads or without, and hash', async () => {
    const lines = csv.split('\n').slice(0, 301);
    const commas = dir.file('twin.csv', `${lines.join('\n')}\n`);
    // the delimiters, not the comma inside a quoted note: a comma followed by an even number of quotes
    const tabs = dir.file(
      'twin.tsv',
      `${lines.map((l) => l.replace(/,(?=(?:[^"]*"[^"]*")*[^"]*$)/g, '\t')).join('\n')}\n`,
    );
    const hashCols = ['--email-col', 'email', '--phone-col', 'phone', '--quiet'];
    const out = (name: string) => dir.file(name);
    const runs = await Promise.all([
      runCli(['map', commas, ...MAP, '-o', out('twin-map.csv'), '--threads', '0']),
      runCli(['map', tabs, ...MAP, '--delimiter', 'tab', '-o', out('tab-map-0.csv'), '--threads', '0']),
      runCli(['map', tabs, ...MAP, '--delimiter', '\\t', '-o', out('tab-map-2.csv'), '--threads', '2']),
      runCli(['hash', commas, ...hashCols, '-o', out('twin-hash.csv')]),
      runCli(['hash', tabs, ...hashCols, '--delimiter', 'tab', '-o', out('tab-hash.csv'), '--threads', '2']),
    ]);
    for (const r of runs) expect(r.code, r.stderr).toBe(0);
    const mapped = readFileSync(out('twin-map.csv'), 'utf8');
    expect(mapped.split('\n')).toHaveLength(302);
    expect(readFileSync(out('tab-map-0.csv'), 'utf8')).toBe(mapped);
    expect(readFileSync(out('tab-map-2.csv'), 'utf8')).toBe(mapped);
    expect(readFileSync(out('tab-hash.csv'), 'utf8')).toBe(readFileSync(out('twin-hash.csv'), 'utf8'));
  });
});

describe('output format and compression by the name of -o', () => {
  it.each([['0'], ['2']])(
    'a Parquet round trip (Parquet in, Parquet out) gives the rows of the plain CSV run, typed (--threads %s)',
    async (threads) => {
      const parquetIn = await parquetOf(input, `round-trip-in-${threads}.parquet`);
      const out = dir.file(`round-trip-out-${threads}.parquet`);
      const run = await runCli(['map', parquetIn, ...MAP, '-o', out, '--threads', threads]);
      expect(run.stderr).toBe('');
      expect(run.code).toBe(0);
      expect(await table(out)).toEqual(await table(plainOut));
      const types = await duck(`SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM read_parquet('${out}'))`);
      expect(Object.fromEntries(types.map(([name, type]) => [name, type]))).toMatchObject({
        id: 'VARCHAR',
        zip: 'VARCHAR',
        email_raw_uid: 'VARCHAR',
        email_refresh_from: 'BIGINT',
        phone_refresh_from: 'BIGINT',
        phone_status: 'VARCHAR',
      });
      // a result missing where an identifier is: null, not an empty string; an input cell stays as read
      const [[nullUids, emptyPhones, zip]] = await duck(
        `SELECT count(*) FILTER (WHERE phone_raw_uid IS NULL), count(*) FILTER (WHERE phone = ''), min(zip) FROM read_parquet('${out}')`,
      );
      expect(nullUids).toBe(BigInt(Math.ceil(4000 / 3)));
      expect(emptyPhones).toBe(BigInt(Math.ceil(4000 / 3)));
      expect(zip).toBe('00134');
    },
  );

  it('Parquet in and out: the file encoded on the reading thread is the one encoded here, --rejects or not', async () => {
    const parquetIn = await parquetOf(input, 'same-bytes-in.parquet');
    const here = dir.file('same-bytes-0.parquet');
    const there = dir.file('same-bytes-2.parquet');
    const withRejects = dir.file('same-bytes-rejects-out.parquet');
    const rejects = dir.file('same-bytes-rejects.parquet');
    const runs = [
      await runCli(['map', parquetIn, ...MAP, '-o', here, '--threads', '0']),
      await runCli(['map', parquetIn, ...MAP, '-o', there, '--threads', '2']),
      await runCli(['map', parquetIn, ...MAP, '-o', withRejects, '--rejects', rejects, '--threads', '2']),
    ];
    for (const r of runs) expect(r.code, r.stderr).toBe(0);
    expect(readFileSync(there).equals(readFileSync(here))).toBe(true);
    expect(readFileSync(withRejects).equals(readFileSync(here))).toBe(true);
    const rejected = await table(rejects);
    expect(rejected.rows.length).toBeGreaterThan(0);
    expect(rejected.rows.every((r) => r.includes('invalid'))).toBe(true);
  });

  it('a CSV input mapped to Parquet with row threads asked for gives the same rows; --rejects is Parquet too', async () => {
    const out = dir.file('threads.parquet');
    const rejects = dir.file('threads-rejects.parquet');
    const run = await runCli(['map', input, ...MAP, '-o', out, '--rejects', rejects, '--threads', '2']);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const plain = await table(plainOut);
    expect(await table(out)).toEqual(plain);
    const rejected = await table(rejects);
    expect(rejected.rows.length).toBeGreaterThan(0);
    expect(rejected.rows.every((r) => r.includes('invalid'))).toBe(true);
  });

  it('--time-format iso writes Parquet times as UTC timestamps', async () => {
    const out = dir.file('iso.parquet');
    const run = await runCli(['map', input, ...MAP, '-o', out, '--time-format', 'iso']);
    expect(run.code, run.stderr).toBe(0);
    const [[id, type, asSeconds]] = await duck(
      `SELECT id, typeof(email_refresh_from), epoch(email_refresh_from)::BIGINT FROM read_parquet('${out}') WHERE email_status = 'mapped' ORDER BY id LIMIT 1`,
    );
    expect(type).toBe('TIMESTAMP WITH TIME ZONE');
    const plain = await table(plainOut);
    const at = (name: string) => plain.header.indexOf(name);
    const same = plain.rows.find((r) => r[at('id')] === id);
    expect(String(asSeconds)).toBe(same?.[at('email_refresh_from')]);
  });

  it('-o x.jsonl.gz writes gzipped JSONL; --compress gzip or none overrides the name', async () => {
    const jsonlGz = dir.file('out.jsonl.gz');
    const gzByFlag = dir.file('by-flag.csv');
    const plainByFlag = dir.file('plain-by-flag.csv.gz');
    const runs = await Promise.all([
      runCli(['map', input, ...MAP, '-o', jsonlGz]),
      runCli(['map', input, ...MAP, '-o', gzByFlag, '--compress', 'gzip']),
      runCli(['map', input, ...MAP, '-o', plainByFlag, '--compress', 'none']),
    ]);
    for (const r of runs) expect(r.code, r.stderr).toBe(0);
    const lines = gunzipSync(readFileSync(jsonlGz)).toString('utf8').trim().split('\n');
    expect(lines).toHaveLength(4000);
    expect(JSON.parse(lines[0])).toMatchObject({ id: '00000', email_refresh_from: expect.any(Number) });
    expect(gunzipSync(readFileSync(gzByFlag)).toString('utf8')).toBe(readFileSync(plainOut, 'utf8'));
    expect(readFileSync(plainByFlag, 'utf8')).toBe(readFileSync(plainOut, 'utf8'));
  });

  it('hash writes Parquet and gzip by the -o name as well', async () => {
    const cols = ['--email-col', 'email', '--phone-col', 'phone', '--quiet'];
    const csvOut = dir.file('hash.csv');
    const parquetOut = dir.file('hash.parquet');
    const gzOut = dir.file('hash.csv.gz');
    const runs = await Promise.all([
      runCli(['hash', input, ...cols, '-o', csvOut]),
      runCli(['hash', input, ...cols, '-o', parquetOut, '--threads', '2']),
      runCli(['hash', input, ...cols, '-o', gzOut, '--threads', '2']),
    ]);
    for (const r of runs) expect(r.code, r.stderr).toBe(0);
    expect(await table(parquetOut)).toEqual(await table(csvOut));
    expect(gunzipSync(readFileSync(gzOut)).toString('utf8')).toBe(readFileSync(csvOut, 'utf8'));
  });

  it('a Parquet output it cannot write is a usage error in one line, before any input is read', async () => {
    const missing = dir.file('no-such-input.csv');
    const cases: Array<[string[], string]> = [
      [['--format', 'parquet'], 'Parquet cannot be written to stdout'],
      [['-o', dir.file('x.parquet.gz')], 'a Parquet file is not gzipped as a whole'],
      [['-o', dir.file('y.parquet'), '--compress', 'gzip'], '--compress gzip does not apply to Parquet'],
    ];
    for (const [flags, words] of cases) {
      const run = await runCli(['map', missing, ...MAP, ...flags]);
      expect(run.code).toBe(2);
      expect(run.stderr).toMatch(
        new RegExp(`^uid2-batch: [^\n]*${words.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}[^\n]*\n$`),
      );
    }
  });
});

describe('Parquet input by --input-format, and its identifier columns checked', () => {
  it('--input-format parquet reads a Parquet file whatever its name', async () => {
    const parquet = await parquetOf(input, 'export.dat');
    const out = dir.file('from-dat.csv');
    const run = await runCli(['map', parquet, ...MAP, '--input-format', 'parquet', '-o', out]);
    expect(run.code, run.stderr).toBe(0);
    expect(readFileSync(out, 'utf8')).toBe(readFileSync(plainOut, 'utf8'));
  });

  it('an identifier column of numbers ends map, hash and optout-check in one line, exit 1, before anything is sent', async () => {
    const p = dir.file('int-phone.parquet');
    await duck(`COPY (SELECT 16175550102::BIGINT AS phone, 'x' AS raw_uid) TO '${p}' (FORMAT parquet)`);
    const line = `uid2-batch: ${p}: identifier column 'phone' is of type INT64 INT_64, not a string column; identifiers must be stored as strings: cast the column to VARCHAR/STRING when exporting\n`;
    const out = dir.file('int-phone.csv');
    const [map, hash] = await Promise.all([
      runCli(['map', p, '--phone-col', 'phone', '--env', 'local', '--quiet', '-o', out]),
      runCli(['hash', p, '--phone-col', 'phone', '--quiet']),
    ]);
    for (const run of [map, hash]) {
      expect(run.code).toBe(1);
      expect(run.stderr).toBe(line);
    }
    expect(() => readFileSync(out)).toThrow();
    const ints = dir.file('int-uids.parquet');
    await duck(`COPY (SELECT 42::BIGINT AS raw_uid) TO '${ints}' (FORMAT parquet)`);
    const optout = await runCli(['optout-check', ints, '--env', 'local', '--quiet']);
    expect(optout.code).toBe(1);
    expect(optout.stderr).toBe(
      `uid2-batch: ${ints}: identifier column 'raw_uid' is of type INT64 INT_64, not a string column; identifiers must be stored as strings: cast the column to VARCHAR/STRING when exporting\n`,
    );
  });
});
