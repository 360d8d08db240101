import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSource } from '../../src/pipeline/io/source.js';
import type { TableSource } from '../../src/pipeline/io/table.js';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import { tempDir } from '../helpers/map-e2e-data.js';
import { runCli } from '../helpers/map-e2e-processes.js';
import { advanceDays, runCli as runServed, setServiceTime, startServe } from '../helpers/remap-e2e.js';
import { settled } from '../helpers/settled-reading.js';

// --hash-encoding hex: every place a hash is written (map --emit-hash on every output path, hash, the remap-due
// changes file, state export) writes lowercase hex of the same bytes; base64 stays the default, byte for byte.
const dir = tempDir('hash-encoding');
let input: string;
let parquetInput: string;

const hex = (s: string): string => createHash('sha256').update(s, 'utf8').digest('hex');
const b64 = (s: string): string => createHash('sha256').update(s, 'utf8').digest('base64');
const b64ToHex = (cell: string): string => (cell === '' ? '' : Buffer.from(cell, 'base64').toString('hex'));

/** Rows of emails (some invalid), phones (some empty) and email hashes given as hex and as base64; a quoted note. */
function mixedRows(n: number): string {
  const lines = ['id,email,phone,given_hash,note'];
  for (let i = 0; i < n; i++) {
    const email = i % 41 === 40 ? `broken-${i}` : `User.${i % 1999}@Example.com`;
    const phone = i % 3 === 0 ? '' : `+1617555${String(i % 10_000).padStart(4, '0')}`;
    const given = `hashed.${i % 500}@example.com`;
    const hash = i % 2 === 0 ? hex(given).toUpperCase() : b64(given);
    lines.push(`${String(i).padStart(5, '0')},${email},${phone},${hash},"note, ${i}, with some words to widen it"`);
  }
  return `${lines.join('\n')}\n`;
}

const COLUMNS = ['--email-col', 'email', '--phone-col', 'phone', '--email-hash-col', 'given_hash'];
const MAP = ['map', ...COLUMNS, '--env', 'local', '--quiet', '--emit-hash'];

/** A table as this tool reads it (any format): header and cells, nulls read as empty cells. */
async function table(path: string): Promise<{ header: string[]; rows: string[][] }> {
  const source: TableSource = await openSource(await settled({ path }));
  const rows: string[][] = [];
  for await (const chunk of source.rows()) for (const r of chunk) rows.push(r.cells);
  return { header: source.header, rows };
}

/** The table with its hash columns (named `hash` or ending `_hash`, not the input's) turned from base64 to hex. */
function asHex(
  t: { header: string[]; rows: string[][] },
  inputColumns: number,
): { header: string[]; rows: string[][] } {
  const hashAt = t.header.flatMap((name, i) => (i >= inputColumns && /(^|_)hash$/.test(name) ? [i] : []));
  expect(hashAt.length).toBeGreaterThan(0);
  return {
    header: t.header,
    rows: t.rows.map((r) => r.map((cell, i) => (hashAt.includes(i) ? b64ToHex(cell) : cell))),
  };
}

beforeAll(async () => {
  ensureBuilt();
  input = dir.file('in.csv', mixedRows(6_000));
  parquetInput = dir.file('in.parquet');
  const db = await DuckDBInstance.create(':memory:');
  const conn = await db.connect();
  await conn.run(
    `COPY (SELECT * FROM read_csv('${input}', all_varchar = true, header = true)) TO '${parquetInput}' (FORMAT parquet, ROW_GROUP_SIZE 4000)`,
  );
  conn.closeSync();
  db.closeSync();
}, 120_000);

afterAll(() => dir.remove());

describe('map --emit-hash --hash-encoding', () => {
  it('base64 (the default) is what --emit-hash wrote before, byte for byte; hex is sha256 in lowercase hex', async () => {
    const plain = dir.file('plain.csv');
    const base64 = dir.file('base64.csv');
    const hexOut = dir.file('hex.csv');
    const runs = [
      await runCli([...MAP, input, '-o', plain, '--threads', '0']),
      await runCli([...MAP, input, '-o', base64, '--threads', '0', '--hash-encoding', 'base64']),
      await runCli([...MAP, input, '-o', hexOut, '--threads', '0', '--hash-encoding', 'hex']),
    ];
    for (const r of runs) expect(r.code, r.stderr).toBe(0);
    expect(readFileSync(base64).equals(readFileSync(plain))).toBe(true);
    const t = await table(hexOut);
    const at = (name: string) => t.header.indexOf(name);
    const first = t.rows[1];
    expect(first[at('email_hash_type')]).toBe('email');
    expect(first[at('email_hash')]).toBe(hex('user.1@example.com'));
    expect(first[at('phone_hash')]).toBe(hex('+16175550001'));
    // a hex hash given in upper case is written as the lowercase hex of the same bytes; a base64 one in hex
    expect(t.rows[0][at('given_hash_hash')]).toBe(hex('hashed.0@example.com'));
    expect(t.rows[1][at('given_hash_hash')]).toBe(hex('hashed.1@example.com'));
    for (const r of t.rows)
      for (const name of ['email_hash', 'phone_hash', 'given_hash_hash'])
        expect(r[at(name)]).toMatch(/^(|[0-9a-f]{64})$/);
    expect(asHex(await table(plain), 5)).toEqual(t);
  });

  it('every output path writes the same hex: --threads 0, 1, 2 to CSV, JSONL and Parquet, and Parquet input', async () => {
    const reference = asHex(await table(dir.file('plain.csv')), 5);
    const cases: [string, string, string][] = [];
    for (const threads of ['0', '1', '2'])
      for (const ext of ['csv', 'jsonl', 'parquet']) cases.push([input, ext, threads]);
    cases.push([parquetInput, 'csv', '2'], [parquetInput, 'parquet', '2'], [parquetInput, 'parquet', '0']);
    for (const [from, ext, threads] of cases) {
      const out = dir.file(`hex-${from === input ? 'csv' : 'parquet'}-${threads}.${ext}`);
      const run = await runCli([...MAP, from, '-o', out, '--threads', threads, '--hash-encoding', 'hex']);
      expect(run.code, run.stderr).toBe(0);
      expect(await table(out), `${from} -> ${ext}, --threads ${threads}`).toEqual(reference);
    }
  }, 240_000);

  it('the hex written maps as input to the same raw UIDs', async () => {
    const hexOut = dir.file('hex.csv');
    const again = dir.file('again.csv');
    const run = await runCli([
      'map',
      hexOut,
      '--email-hash-col',
      'email_hash',
      '--env',
      'local',
      '--quiet',
      '-o',
      again,
      '--keep',
      'id,email_raw_uid',
    ]);
    expect(run.code, run.stderr).toBe(0);
    const t = await table(again);
    const mapped = t.rows.filter((r) => r[2] !== '');
    expect(mapped.length).toBeGreaterThan(5_000);
    expect(t.header).toEqual(['id', 'email_raw_uid', 'raw_uid', 'prev_raw_uid', 'refresh_from', 'status', 'reason']);
    for (const r of mapped) expect(r[2]).toBe(r[1]);
  });

  it('an unknown encoding is refused in one line (exit 2)', async () => {
    const run = await runCli([...MAP, input, '--hash-encoding', 'base32']);
    expect(run.code).toBe(2);
    expect(run.stderr.split('\n')[0]).toMatch(/--hash-encoding.*'base32'.*base64, hex/);
  });
});

describe('--hash-encoding where no hash is written', () => {
  it('map without --emit-hash, optout-check without --state: refused in one line (exit 2), nothing written', async () => {
    const out = dir.file('never.csv');
    const runs = [
      await runCli(['map', input, ...COLUMNS, '--env', 'local', '-o', out, '--hash-encoding', 'hex']),
      await runCli(['optout-check', input, '--col', 'id', '--env', 'local', '-o', out, '--hash-encoding', 'hex']),
    ];
    for (const r of runs) {
      expect(r.code).toBe(2);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr).toMatch(/--hash-encoding hex applies to the hashes/);
    }
    expect(existsSync(out)).toBe(false);
  });
});

describe('hash --hash-encoding', () => {
  it('hex on the main thread and on row threads, CSV and Parquet; base64 unchanged by default', async () => {
    const plain = dir.file('hash-plain.csv');
    const explicit = dir.file('hash-base64.csv');
    const runs = [
      await runCli(['hash', input, ...COLUMNS, '--quiet', '-o', plain, '--threads', '0']),
      await runCli([
        'hash',
        input,
        ...COLUMNS,
        '--quiet',
        '-o',
        explicit,
        '--threads',
        '2',
        '--hash-encoding',
        'base64',
      ]),
    ];
    for (const r of runs) expect(r.code, r.stderr).toBe(0);
    expect(readFileSync(explicit).equals(readFileSync(plain))).toBe(true);
    const reference = asHex(await table(plain), 5);
    expect(reference.rows[1][reference.header.indexOf('email_hash')]).toBe(hex('user.1@example.com'));
    expect(reference.rows[0][reference.header.indexOf('given_hash_hash')]).toBe(hex('hashed.0@example.com'));
    for (const [ext, threads] of [
      ['csv', '0'],
      ['csv', '2'],
      ['parquet', '2'],
    ]) {
      const out = dir.file(`hash-hex-${threads}.${ext}`);
      const run = await runCli([
        'hash',
        input,
        ...COLUMNS,
        '--quiet',
        '-o',
        out,
        '--threads',
        threads,
        '--hash-encoding',
        'hex',
      ]);
      expect(run.code, run.stderr).toBe(0);
      expect(await table(out), `${ext}, --threads ${threads}`).toEqual(reference);
    }
  }, 120_000);
});

describe('the state file: state export and the remap-due changes file', () => {
  it('state export, optout-check --state and the remap-due changes file write hash_type and the hash in hex', async () => {
    const served = await startServe();
    try {
      await setServiceTime(served.url, '2026-01-01T00:00:00Z');
      const small = dir.file('small.csv', 'email\nalice@example.com\nbob@example.com\nnot an email\n');
      const state = dir.file('s.db');
      const mapped = await runServed(['map', small, '--quiet', '--state', state, '-o', dir.file('m.csv')], { served });
      expect(mapped.code, mapped.stderr).toBe(0);
      const base64 = dir.file('export.csv');
      const hexExport = dir.file('export-hex.jsonl');
      const exports = [
        await runCli(['state', 'export', state, '-q', '-o', base64]),
        await runCli(['state', 'export', state, '-q', '-o', hexExport, '--format', 'jsonl', '--hash-encoding', 'hex']),
      ];
      for (const r of exports) expect(r.code, r.stderr).toBe(0);
      const b = await table(base64);
      expect(b.header.slice(0, 2)).toEqual(['hash_type', 'hash']);
      expect(b.rows.map((r) => r[1]).sort()).toEqual([b64('alice@example.com'), b64('bob@example.com')].sort());
      const lines = readFileSync(hexExport, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(lines.map((l) => l.hash).sort()).toEqual([hex('alice@example.com'), hex('bob@example.com')].sort());
      expect(lines.every((l) => l.hash_type === 'email')).toBe(true);

      // the opt-out sweep names each entry by its hash as well
      const swept = dir.file('swept.csv');
      const sweep = await runServed(['optout-check', '--state', state, '-q', '-o', swept, '--hash-encoding', 'hex'], {
        served,
      });
      expect(sweep.code, sweep.stderr).toBe(0);
      const w = await table(swept);
      expect([...new Set(w.rows.map((r) => r[w.header.indexOf('hash')]))].sort()).toEqual(
        [hex('alice@example.com'), hex('bob@example.com')].sort(),
      );

      // 400 days on both entries are due and their salt buckets have rotated: each is a change
      const later = Math.floor((await advanceDays(served.url, 400)) / 1000);
      const changes = dir.file('changes.csv');
      const remap = await runServed(
        ['remap-due', '--state', state, '--now', String(later), '-q', '-o', changes, '--hash-encoding', 'hex'],
        { served },
      );
      expect(remap.code, remap.stderr).toBe(0);
      const c = await table(changes);
      expect(c.rows.map((r) => r[c.header.indexOf('hash')]).sort()).toEqual(
        [hex('alice@example.com'), hex('bob@example.com')].sort(),
      );
    } finally {
      await served.stop();
    }
  });
});
