import { readFileSync } from 'node:fs';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Base64 } from '../../src/identity/index.js';
import { openSource } from '../../src/pipeline/io/source.js';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import { column, parseCsv, tempDir } from '../helpers/map-e2e-data.js';
import { runCli } from '../helpers/map-e2e-processes.js';
import {
  countryCsv,
  countryJsonl,
  countryRows,
  expectedE164,
  type CountryRow,
} from '../helpers/multi-country-phones.js';
import { settled } from '../helpers/settled-reading.js';

// --phone-region-col through the built CLI: each row's phone is read in its own country, exactly as libphonenumber-js
// reads it there, on every path (main thread, row threads, CSV, JSONL, Parquet; map, hash, token validate).
const dir = tempDir('phone-region-col');
const LOCAL = ['--env', 'local', '--quiet'];
const REGION_COL = ['--phone-col', 'phone', '--phone-region-col', 'Country', '--phone-region', 'US'];

let rows: CountryRow[];
let expected: (string | null)[];
let csvIn: string;
/** The raw UID of each expected E.164 number, as map gives it for the E.164 form itself. */
let referenceUid: Map<string, string>;

async function duck(sql: string): Promise<void> {
  const db = await DuckDBInstance.create(':memory:');
  const conn = await db.connect();
  try {
    await conn.run(sql);
  } finally {
    conn.closeSync();
    db.closeSync();
  }
}

async function readTable(path: string): Promise<{ header: string[]; rows: string[][] }> {
  const source = await openSource(await settled({ path }));
  const out: string[][] = [];
  for await (const chunk of source.rows()) for (const r of chunk) out.push(r.cells);
  return { header: source.header, rows: out };
}

beforeAll(async () => {
  ensureBuilt();
  rows = countryRows();
  expected = rows.map(expectedE164);
  csvIn = dir.file('crm.csv', countryCsv(rows));
  const e164 = [...new Set(expected.filter((e): e is string => e !== null))];
  const reference = dir.file('e164.csv', `phone\n${e164.join('\n')}\n`);
  const run = await runCli(['map', reference, '--phone-col', 'phone', ...LOCAL]);
  expect(run.code, run.stderr).toBe(0);
  const table = parseCsv(run.stdout);
  expect(column(table, 'status').every((s) => s === 'mapped')).toBe(true);
  const uids = column(table, 'raw_uid');
  referenceUid = new Map(e164.map((e, i) => [e, uids[i]]));
}, 120_000);

afterAll(() => dir.remove());

/** Each output row maps as its expected E.164 number does, or is invalid where libphonenumber-js finds none. */
function expectMappedPerCountry(table: { header: string[]; rows: string[][] }): void {
  expect(column(table, 'id')).toEqual(rows.map((r) => r.id));
  // the country and phone cells stay as they were read
  expect(column(table, 'Country')).toEqual(rows.map((r) => r.country));
  expect(column(table, 'phone')).toEqual(rows.map((r) => r.phone));
  const status = column(table, 'status');
  const uid = column(table, 'raw_uid');
  rows.forEach((row, i) => {
    const e164 = expected[i];
    const where = `${row.id} ${row.country} ${row.phone}`;
    if (e164 === null) expect(status[i], where).toBe('invalid');
    else {
      expect(status[i], where).toBe('mapped');
      expect(uid[i], where).toBe(referenceUid.get(e164));
    }
  });
}

describe('map --phone-region-col', () => {
  it('the test file spans at least 10 countries, national and international forms, codes and names', () => {
    expect(new Set(rows.map((r) => r.region)).size).toBeGreaterThanOrEqual(11);
    expect(rows.some((r) => r.phone.startsWith('00'))).toBe(true);
    expect(rows.some((r) => r.country.length > 2)).toBe(true);
    // Brazilian and Indian national numbers, which --phone-region US alone reads as valid US numbers
    expect(expected[rows.findIndex((r) => r.phone === '(21) 2690-3311' && r.region === 'BR')]).toBe('+552126903311');
    expect(expected[rows.findIndex((r) => r.phone === '90685 36153')]).toBe('+919068536153');
    // written with another country's code (+55, 0055, 011 44, 010 44): that country is kept
    expect(expected[rows.findIndex((r) => r.phone === '0055 21 2690 3311')]).toBe('+552126903311');
    expect(expected[rows.findIndex((r) => r.phone === '011 44 20 7946 0958')]).toBe('+442079460958');
  });

  it.each([['0'], ['1'], ['2']])('CSV, --threads %s: each row in its own country', async (threads) => {
    const run = await runCli(['map', csvIn, ...REGION_COL, ...LOCAL, '--threads', threads]);
    expect(run.code, run.stderr).toBe(0);
    expectMappedPerCountry(parseCsv(run.stdout));
  });

  it.each([['0'], ['2']])('JSONL, --threads %s', async (threads) => {
    const input = dir.file(`crm-${threads}.jsonl`, countryJsonl(rows));
    const out = dir.file(`crm-jsonl-${threads}.csv`);
    const run = await runCli(['map', input, ...REGION_COL, ...LOCAL, '--threads', threads, '-o', out]);
    expect(run.code, run.stderr).toBe(0);
    expectMappedPerCountry(parseCsv(readFileSync(out, 'utf8')));
  });

  it.each([
    ['0', 'csv'],
    ['2', 'csv'],
    ['2', 'parquet'],
  ])('Parquet, --threads %s, to %s', async (threads, format) => {
    const input = dir.file(`crm-${threads}-${format}.parquet`);
    await duck(
      `COPY (SELECT * FROM read_csv('${csvIn}', all_varchar = true, header = true)) TO '${input}' (FORMAT parquet, ROW_GROUP_SIZE 40)`,
    );
    const out = dir.file(`crm-parquet-${threads}.${format}`);
    const run = await runCli(['map', input, ...REGION_COL, ...LOCAL, '--threads', threads, '-o', out]);
    expect(run.code, run.stderr).toBe(0);
    // a Parquet reader reads the country and phone cells as they are, empty where the CSV cell was empty
    const table = format === 'csv' ? parseCsv(readFileSync(out, 'utf8')) : await readTable(out);
    expectMappedPerCountry(table);
  });

  it("an unknown country makes the row's phone invalid, naming the cell; --phone-region US alone maps strangers", async () => {
    const [perRow, usOnly] = await Promise.all([
      runCli(['map', csvIn, ...REGION_COL, ...LOCAL, '--threads', '0']),
      runCli(['map', csvIn, '--phone-col', 'phone', '--phone-region', 'US', ...LOCAL, '--threads', '0']),
    ]);
    expect(perRow.code, perRow.stderr).toBe(0);
    const table = parseCsv(perRow.stdout);
    const narnia = rows.findIndex((r) => r.country === 'Narnia');
    expect(column(table, 'status')[narnia]).toBe('invalid');
    expect(column(table, 'reason')[narnia]).toBe(
      "invalid phone: the row's country 'Narnia' is not an ISO 3166 code or a country name this tool knows",
    );
    // what the flag alone did: the Brazilian number became a valid US one, and a stranger's raw UID came back
    const brazil = rows.findIndex((r) => r.phone === '(21) 2690-3311' && r.region === 'BR');
    const us = parseCsv(usOnly.stdout);
    expect(column(us, 'status')[brazil]).toBe('mapped');
    expect(column(us, 'raw_uid')[brazil]).not.toBe(referenceUid.get('+552126903311'));
    expect(column(table, 'raw_uid')[brazil]).toBe(referenceUid.get('+552126903311'));
  });

  it('a column the input lacks is a usage error in one line', async () => {
    const run = await runCli(['map', csvIn, '--phone-col', 'phone', '--phone-region-col', 'Land', ...LOCAL]);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/^uid2-batch: --phone-region-col: [^\n]*has no column 'Land'[^\n]*\n$/);
  });
});

describe('hash and token validate --phone-region-col', () => {
  it.each([['0'], ['2']])(
    'hash, --threads %s: the hashes of the E.164 forms libphonenumber-js gives',
    async (threads) => {
      const run = await runCli(['hash', csvIn, ...REGION_COL, '--quiet', '--threads', threads]);
      expect(run.code, run.stderr).toBe(0);
      const table = parseCsv(run.stdout);
      expect(column(table, 'hash')).toEqual(expected.map((e) => (e === null ? '' : sha256Base64(e))));
    },
  );

  it('token validate --input: the hash sent for each row is that of its E.164 form in its country', async () => {
    // tokens of the E.164 numbers, then validated against the rows as written, with their countries
    const valid = rows.flatMap((r, i) => (expected[i] === null ? [] : [{ ...r, e164: expected[i] as string }]));
    const generateIn = dir.file(
      'tokens-in.csv',
      `identifier,identifier_type\n${valid.map((r) => `${r.e164},phone`).join('\n')}\n`,
    );
    const generated = dir.file('tokens.csv');
    const gen = await runCli(['token', 'generate', '--input', generateIn, '-o', generated, ...LOCAL]);
    expect(gen.code, gen.stderr).toBe(0);
    const tokens = column(parseCsv(readFileSync(generated, 'utf8')), 'advertising_token');
    const quote = (c: string): string => `"${c.replace(/"/g, '""')}"`;
    const validateIn = dir.file(
      'validate-in.csv',
      `identifier,identifier_type,Country,token\n${valid
        .map((r, i) => [r.phone, 'phone', r.country, tokens[i]].map(quote).join(','))
        .join('\n')}\n`,
    );
    const out = dir.file('validate-out.csv');
    const run = await runCli([
      'token',
      'validate',
      '--input',
      validateIn,
      '--phone-region-col',
      'country',
      '--phone-region',
      'US',
      '-o',
      out,
      ...LOCAL,
    ]);
    expect(run.code, run.stderr).toBe(0);
    const table = parseCsv(readFileSync(out, 'utf8'));
    expect(column(table, 'hash')).toEqual(valid.map((r) => sha256Base64(r.e164)));
    expect(column(table, 'valid')).toEqual(valid.map(() => 'true'));
  });
});
