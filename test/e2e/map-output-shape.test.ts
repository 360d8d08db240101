import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { PassThrough } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { mapFlags, runMap, type MapDeps } from '../../src/cli/map/map.js';
import { UserError } from '../../src/cli/shared/exit-codes.js';
import { parseCsv, tempDir } from '../helpers/map-e2e-data.js';

// runMap in this process against the embedded service: what the output holds, column by column.
const dir = tempDir('output-shape');
afterAll(() => dir.remove());

function io(): { deps: MapDeps; out: () => string; err: () => string } {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = '';
  let err = '';
  stdout.on('data', (d: Buffer) => (out += d.toString()));
  stderr.on('data', (d: Buffer) => (err += d.toString()));
  const stdin = Object.assign(new PassThrough(), { isTTY: true });
  return {
    deps: { stdin, stdout, stderr, env: { XDG_CONFIG_HOME: dir.path }, now: () => Date.now() },
    out: () => out,
    err: () => err,
  };
}

async function map(input: string, opts: Record<string, unknown>): Promise<{ code: number; out: string; err: string }> {
  const t = io();
  const code = await runMap(
    mapFlags(input, {
      env: 'local',
      quiet: true,
      emailCol: [],
      phoneCol: [],
      emailHashCol: [],
      phoneHashCol: [],
      ...opts,
    }),
    t.deps,
  );
  return { code, out: t.out(), err: t.err() };
}

const sha = (s: string): string => createHash('sha256').update(s, 'utf8').digest('base64');

/** zip codes and ids with leading zeros, an empty note, a valid, an opted-out, an invalid and a missing email. */
const CRM = dir.file(
  'crm.csv',
  'id,zip,email,note\n007,02134,User.One@Example.com,\n008,10001,optout@example.com,x\n009,,not-an-email,y\n010,00501,,z\n',
);

describe('typed JSONL', () => {
  it('input cells stay the strings read; refresh_from is a number, missing result values are null', async () => {
    const r = await map(CRM, { output: dir.file('typed.jsonl') });
    expect(r.code).toBe(0);
    const rows = readFileSync(dir.file('typed.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(rows.map((x) => [x.id, x.zip, x.note])).toEqual([
      ['007', '02134', ''],
      ['008', '10001', 'x'],
      ['009', '', 'y'],
      ['010', '00501', 'z'],
    ]);
    const [mapped, optout, invalid, missing] = rows;
    expect(mapped).toMatchObject({ status: 'mapped', prev_raw_uid: null, reason: null });
    expect(typeof mapped.raw_uid).toBe('string');
    expect(Number.isInteger(mapped.refresh_from)).toBe(true);
    expect(mapped.refresh_from as number).toBeGreaterThan(Date.now() / 1000);
    expect(optout).toMatchObject({ status: 'optout', raw_uid: null, prev_raw_uid: null, refresh_from: null });
    expect(typeof optout.reason).toBe('string');
    expect(invalid).toMatchObject({ status: 'invalid', raw_uid: null, refresh_from: null, reason: 'invalid email' });
    expect(missing).toMatchObject({ email: '', status: 'missing', raw_uid: null });
  });

  it('--time-format iso writes refresh_from as ISO 8601 UTC, in CSV and JSONL alike', async () => {
    const unix = parseCsv((await map(CRM, {})).out);
    const iso = parseCsv((await map(CRM, { timeFormat: 'iso' })).out);
    const at = unix.header.indexOf('refresh_from');
    expect(iso.header).toEqual(unix.header);
    const seconds = Number(unix.rows[0][at]);
    expect(iso.rows[0][at]).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(Date.parse(iso.rows[0][at]) / 1000).toBe(seconds);
    expect(iso.rows[1][at]).toBe('');
    const jsonl = (await map(CRM, { timeFormat: 'iso', format: 'jsonl' })).out.split('\n')[0];
    expect(JSON.parse(jsonl).refresh_from).toBe(iso.rows[0][at]);
  });

  it("--rejects shares the output's format, and says so when its name says another", async () => {
    const rejects = dir.file('rejects.csv');
    const r = await map(CRM, { output: dir.file('out.jsonl'), rejects, quiet: false });
    expect(r.err).toContain(`--rejects ${rejects} is written as JSONL, the format of the output`);
    const lines = readFileSync(rejects, 'utf8').trim().split('\n');
    expect(lines.map((l) => (JSON.parse(l) as { status: string }).status)).toEqual(['optout', 'invalid']);
    const same = await map(CRM, { output: dir.file('out2.jsonl'), rejects: dir.file('rejects.ndjson'), quiet: false });
    expect(same.err).not.toContain('--rejects');
  });

  it('CSV output without the new flags is as before: every input column, then the five result columns', async () => {
    const { header, rows } = parseCsv((await map(CRM, {})).out);
    expect(header).toEqual([
      'id',
      'zip',
      'email',
      'note',
      'raw_uid',
      'prev_raw_uid',
      'refresh_from',
      'status',
      'reason',
    ]);
    expect(rows[0].slice(0, 4)).toEqual(['007', '02134', 'User.One@Example.com', '']);
    expect(rows[0][6]).toMatch(/^\d+$/);
  });
});

describe('--emit-hash, --keep, --drop-input-columns, --result-prefix', () => {
  it('--emit-hash writes the hash sent and its type; none for a cell not sent', async () => {
    const { header, rows } = parseCsv((await map(CRM, { emitHash: true })).out);
    expect(header.slice(-2)).toEqual(['hash', 'hash_type']);
    expect(rows.map((r) => r.slice(-2))).toEqual([
      [sha('user.one@example.com'), 'email'],
      [sha('optout@example.com'), 'email'],
      ['', ''],
      ['', ''],
    ]);
    const jsonl = (await map(CRM, { emitHash: true, format: 'jsonl' })).out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(jsonl[2]).toMatchObject({ hash: null, hash_type: null });
  });

  it('--keep writes only the columns named, in the order named; --drop-input-columns none', async () => {
    const kept = parseCsv((await map(CRM, { keep: ['zip,id'], emitHash: true })).out);
    expect(kept.header).toEqual([
      'zip',
      'id',
      'raw_uid',
      'prev_raw_uid',
      'refresh_from',
      'status',
      'reason',
      'hash',
      'hash_type',
    ]);
    expect(kept.rows[0].slice(0, 2)).toEqual(['02134', '007']);
    expect(kept.rows.flat().join(' ')).not.toMatch(/@/);
    const dropped = parseCsv((await map(CRM, { dropInputColumns: true })).out);
    expect(dropped.header).toEqual(['raw_uid', 'prev_raw_uid', 'refresh_from', 'status', 'reason']);
    expect(dropped.rows.map((r) => r[3])).toEqual(['mapped', 'optout', 'invalid', 'missing']);
    const both = parseCsv((await map(CRM, { keep: ['id'], dropInputColumns: true })).out);
    expect(both.header[0]).toBe('id');
    expect(both.header).toHaveLength(6);
  });

  it('several identifier columns: prefixes from their names, spaces and punctuation as _; --result-prefix COL=P', async () => {
    const input = dir.file('two.csv', 'Customer ID,Email Address,Phone #\n1,a@example.com,+14155550100\n');
    const defaults = parseCsv((await map(input, { emailCol: ['Email Address'], phoneCol: ['Phone #'] })).out);
    expect(defaults.header).toEqual([
      'Customer ID',
      'Email Address',
      'Phone #',
      ...['raw_uid', 'prev_raw_uid', 'refresh_from', 'status', 'reason'].map((f) => `Email_Address_${f}`),
      ...['raw_uid', 'prev_raw_uid', 'refresh_from', 'status', 'reason'].map((f) => `Phone_${f}`),
    ]);
    const named = parseCsv(
      (
        await map(input, {
          emailCol: ['Email Address'],
          phoneCol: ['Phone #'],
          resultPrefix: ['email address=uid2 e', 'Phone #=p_'],
        })
      ).out,
    );
    expect(named.header.slice(3, 5)).toEqual(['uid2_e_raw_uid', 'uid2_e_prev_raw_uid']);
    expect(named.header.slice(8, 10)).toEqual(['p_raw_uid', 'p_prev_raw_uid']);
    const single = parseCsv((await map(CRM, { resultPrefix: ['uid2'] })).out);
    expect(single.header.slice(4)).toEqual([
      'uid2_raw_uid',
      'uid2_prev_raw_uid',
      'uid2_refresh_from',
      'uid2_status',
      'uid2_reason',
    ]);
  });

  it('refuses a --keep or --result-prefix that names no column, and a bare prefix with several identifier columns', async () => {
    await expect(map(CRM, { keep: ['id,nope'] })).rejects.toThrow(
      /--keep: .*has no column 'nope'; its columns are 'id', 'zip', 'email', 'note'/,
    );
    await expect(map(CRM, { resultPrefix: ['zip=z'] })).rejects.toThrow(
      /'zip' is not an identifier column of this run/,
    );
    const input = dir.file('two-b.csv', 'email,phone\na@example.com,+14155550100\n');
    const err = await map(input, { resultPrefix: ['x'] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UserError);
    expect((err as Error).message).toMatch(
      /is for one identifier column, and there are 2: name each, e.g. --result-prefix 'email=email'/,
    );
  });
});

describe('a one-column file without a header line', () => {
  it('of emails: the first line is a row, the column col1, and stderr says so', async () => {
    const input = dir.file('emails.txt', 'First@Example.com\nsecond@example.com\nnot-an-email\n');
    const r = await map(input, { quiet: false, emitHash: true });
    const { header, rows } = parseCsv(r.out);
    expect(header).toEqual([
      'col1',
      'raw_uid',
      'prev_raw_uid',
      'refresh_from',
      'status',
      'reason',
      'hash',
      'hash_type',
    ]);
    expect(rows.map((x) => [x[0], x[4], x[6]])).toEqual([
      ['First@Example.com', 'mapped', sha('first@example.com')],
      ['second@example.com', 'mapped', sha('second@example.com')],
      ['not-an-email', 'invalid', ''],
    ]);
    expect(r.err).toMatch(/the first line of .*emails.txt is an email, not a header: .*--no-header --email-col col1/);
  });

  it('of phones, from stdin; a header that is a name is still a header', async () => {
    const t = io();
    const stdin = Object.assign(new PassThrough(), { isTTY: false });
    stdin.end('+14155550100\n+14155550101\n');
    t.deps.stdin = stdin;
    const code = await runMap(
      mapFlags('-', { env: 'local', quiet: true, emailCol: [], phoneCol: [], emailHashCol: [], phoneHashCol: [] }),
      t.deps,
    );
    expect(code).toBe(0);
    const { header, rows } = parseCsv(t.out());
    expect(header[0]).toBe('col1');
    expect(rows.map((x) => [x[0], x[4]])).toEqual([
      ['+14155550100', 'mapped'],
      ['+14155550101', 'mapped'],
    ]);
    const named = parseCsv((await map(dir.file('named.csv', 'email\na@example.com\n'), {})).out);
    expect(named.header[0]).toBe('email');
    expect(named.rows).toHaveLength(1);
    // a named column says the first line is a header, whatever it holds
    await expect(map(dir.file('flagged.csv', 'a@example.com\nb@example.com\n'), { emailCol: ['x'] })).rejects.toThrow(
      /has no column 'x'/,
    );
  });
});
