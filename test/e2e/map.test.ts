import { readFileSync, existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Base64 } from '../../src/identity/index.js';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import { column, emailOfRow, emailRows, parseCsv, tempDir } from '../helpers/map-e2e-data.js';
import { runCli, serveConnection, startServe, type ServeProcess } from '../helpers/map-e2e-processes.js';

// The built CLI against `uid2-batch serve` in another process, as a user would run it.
let serve: ServeProcess;
let conn: { args: string[]; env: Record<string, string> };
const dir = tempDir('serve');

beforeAll(async () => {
  ensureBuilt();
  serve = await startServe();
  conn = serveConnection(serve);
}, 120_000);

afterAll(async () => {
  await serve?.stop();
  dir.remove();
});

function map(args: string[], input?: string) {
  return runCli(['map', ...args, ...conn.args], { env: conn.env, ...(input !== undefined ? { input } : {}) });
}

const MIXED = [
  'id,email,phone,email_hash,phone_hash',
  `1,Jane.Doe+news@Gmail.com,+14155550100,${sha256Base64('janedoe@gmail.com')},${sha256Base64('+14155550100')}`,
  `2,optout@example.com,+00000000000,${Buffer.from(sha256Base64('optout@example.com'), 'base64').toString('hex')},`,
  '3,not-an-email,4155550100,abc,zzz',
  `4,JANE.DOE@gmail.com,+14155550100,${sha256Base64('someone@example.com')},${sha256Base64('+442071838750')}`,
].join('\n');

describe('map against uid2-batch serve (separate process)', () => {
  it('maps several identifier columns of mixed kinds, with every local and service status', async () => {
    const input = dir.file('mixed.csv', `${MIXED}\n`);
    const output = dir.file('mixed-out.csv');
    const summaryPath = dir.file('mixed-summary.json');
    const res = await map([
      input,
      '--email-col',
      'email',
      '--phone-col',
      'phone',
      '--email-hash-col',
      'email_hash',
      '--phone-hash-col',
      'phone_hash',
      '-o',
      output,
      '--summary-json',
      summaryPath,
    ]);
    expect(res.code).toBe(0);
    const table = parseCsv(readFileSync(output, 'utf8'));
    expect(table.header.slice(0, 5)).toEqual(['id', 'email', 'phone', 'email_hash', 'phone_hash']);
    expect(table.header).toContain('email_raw_uid');
    expect(table.header).toContain('phone_hash_reason');
    expect(table.header).toHaveLength(5 + 4 * 5);
    expect(column(table, 'id')).toEqual(['1', '2', '3', '4']);
    expect(column(table, 'email_status')).toEqual(['mapped', 'optout', 'invalid', 'mapped']);
    expect(column(table, 'phone_status')).toEqual(['mapped', 'optout', 'invalid', 'mapped']);
    expect(column(table, 'email_hash_status')).toEqual(['mapped', 'optout', 'invalid', 'mapped']);
    expect(column(table, 'phone_hash_status')).toEqual(['mapped', 'missing', 'invalid', 'mapped']);
    expect(column(table, 'phone_hash_reason')[1]).toBe('empty');
    // the same person, given raw, spelled differently, or as a hash (base64 or hex), gets the same raw UID
    const emailUid = column(table, 'email_raw_uid');
    expect(emailUid[0]).toMatch(/^[A-Za-z0-9+/]{43}=$/);
    expect(emailUid[3]).toBe(emailUid[0]);
    expect(column(table, 'email_hash_raw_uid')[0]).toBe(emailUid[0]);
    expect(column(table, 'phone_hash_raw_uid')[0]).toBe(column(table, 'phone_raw_uid')[0]);
    // a phone hash is not an email hash: the same digits as a phone get another raw UID than as an email would
    expect(column(table, 'phone_raw_uid')[0]).not.toBe(emailUid[0]);
    expect(Number(column(table, 'email_refresh_from')[0])).toBeGreaterThan(Date.now() / 1000);
    const summary = JSON.parse(readFileSync(summaryPath, 'utf8'));
    expect(summary).toMatchObject({
      rows: 4,
      status: { mapped: 8, optout: 3, invalid: 4, error: 0, missing: 1 },
      requests: 1,
      retries: 0,
      http_429: 0,
    });
    expect(summary.unique_identifiers).toBe(6);
    expect(typeof summary.duration_s).toBe('number');
    expect(typeof summary.rows_per_s).toBe('number');
  });

  it('reads stdin and writes stdout, in input order, with duplicates answered alike and sent once', async () => {
    const before = await serve.stats();
    const res = await map(['-', '--batch-size', '500', '--concurrency', '8'], emailRows(12_000));
    expect(res.code).toBe(0);
    expect(res.stderr).toMatch(/map: 12,000 rows/);
    const table = parseCsv(res.stdout);
    expect(column(table, 'id')).toEqual(Array.from({ length: 12_000 }, (_, i) => String(i)));
    const uids = column(table, 'raw_uid');
    const status = column(table, 'status');
    const uidOf = new Map<string, string>();
    for (let i = 0; i < 12_000; i++) {
      const email = emailOfRow(i);
      if (email.startsWith('broken')) {
        expect(status[i]).toBe('invalid');
        continue;
      }
      expect(status[i]).toBe('mapped');
      const seen = uidOf.get(email);
      if (seen !== undefined) expect(uids[i]).toBe(seen);
      uidOf.set(email, uids[i]);
    }
    expect(uidOf.size).toBeLessThan(12_000 - 240);
    const after = await serve.stats();
    const sent = (after.items['/v3/identity/map'] ?? 0) - (before.items['/v3/identity/map'] ?? 0);
    expect(sent).toBe(uidOf.size);
  });

  it('handles an empty file, a header-only file, one row, and rows with a missing column', async () => {
    const empty = await map([dir.file('empty.csv', '')]);
    expect(empty.code).toBe(0);
    expect(empty.stdout).toBe('');

    const headerOnly = await map([dir.file('header.csv', 'id,email\n')]);
    expect(headerOnly.code).toBe(0);
    expect(headerOnly.stdout).toBe('id,email,raw_uid,prev_raw_uid,refresh_from,status,reason\n');

    const one = await map([dir.file('one.csv', 'email\r\nsomeone@example.com\r\n')]);
    expect(one.code).toBe(0);
    expect(parseCsv(one.stdout).rows).toHaveLength(1);
    expect(column(parseCsv(one.stdout), 'status')).toEqual(['mapped']);

    const ragged = await map([
      dir.file('ragged.csv', 'id,segment,email\n1,a,x@example.com\n2,b\n3\n4,d,y@example.com\n'),
      '--email-col',
      'email',
    ]);
    expect(ragged.code).toBe(0);
    const table = parseCsv(ragged.stdout);
    expect(table.rows.map((r) => r.length)).toEqual([8, 8, 8, 8]);
    expect(table.rows[2].slice(0, 3)).toEqual(['3', '', '']);
    expect(column(table, 'status')).toEqual(['mapped', 'invalid', 'invalid', 'mapped']);
    expect(column(table, 'reason')[1]).toBe('row has 2 cells, header has 3');
  });

  it('writes JSONL, and the rejects file with the rows that did not map', async () => {
    const rejects = dir.file('rejects.jsonl');
    const res = await map([
      dir.file('rj.csv', 'id,email\n1,a@example.com\n2,nope\n3,optout@example.com\n'),
      '--format',
      'jsonl',
      '--rejects',
      rejects,
    ]);
    expect(res.code).toBe(0);
    const rows = res.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, string>);
    expect(rows.map((r) => r.status)).toEqual(['mapped', 'invalid', 'optout']);
    const rejected = readFileSync(rejects, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, string>);
    expect(rejected.map((r) => [r.id, r.status, r.reason])).toEqual([
      ['2', 'invalid', 'invalid email'],
      ['3', 'optout', 'optout'],
    ]);
  });

  it('says clearly what is wrong with the columns, and exits 2', async () => {
    const res = await map([dir.file('cols.csv', 'id,contact\n1,a@example.com\n')]);
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(/no identifier column found/);
    expect(res.stderr).not.toMatch(/\n\s+at /);
    const missing = await map([dir.file('cols2.csv', 'id,email\n1,a@example.com\n'), '--phone-col', 'mobile']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/no column 'mobile'/);
  });

  it('exits 4 at once when the service refuses the API key, writing no output file', async () => {
    const output = dir.file('refused.csv');
    const res = await runCli(['map', dir.file('r.csv', emailRows(50)), '-o', output, ...conn.args], {
      env: { ...conn.env, UID2_API_KEY: 'UID2-L-L-wrong-key' },
    });
    expect(res.code).toBe(4);
    expect(res.stderr).toMatch(/401/);
    expect(existsSync(output)).toBe(false);
  });
});

describe('map with requests that fail after their last attempt', () => {
  let failing: ServeProcess;
  beforeAll(async () => {
    failing = await startServe(['--fault-500', '0.5']);
  });
  afterAll(async () => {
    await failing?.stop();
  });

  it('marks the rows of failed requests error, keeps the rest, and exits 3; --fail-fast stops with exit 1', async () => {
    const c = serveConnection(failing);
    const input = dir.file('half.csv', emailRows(400));
    const output = dir.file('half-out.csv');
    const res = await runCli(['map', input, '-o', output, '--batch-size', '10', '--max-attempts', '1', ...c.args], {
      env: c.env,
    });
    expect(res.code).toBe(3);
    const table = parseCsv(readFileSync(output, 'utf8'));
    const status = column(table, 'status');
    expect(status.filter((s) => s === 'error').length).toBeGreaterThan(0);
    expect(status.filter((s) => s === 'mapped').length).toBeGreaterThan(0);
    const reasons = new Set(column(table, 'reason').filter((_, i) => status[i] === 'error'));
    expect([...reasons].every((r) => /HTTP 500/.test(r))).toBe(true);
    expect(column(table, 'id')).toEqual(Array.from({ length: 400 }, (_, i) => String(i)));

    const ff = await runCli(
      ['map', input, '-o', dir.file('ff.csv'), '--batch-size', '10', '--max-attempts', '1', '--fail-fast', ...c.args],
      { env: c.env },
    );
    expect(ff.code).toBe(1);
    expect(ff.stderr).toMatch(/--fail-fast/);
    expect(existsSync(dir.file('ff.csv'))).toBe(false);
  });
});
