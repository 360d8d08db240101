import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { parse } from 'csv-parse/sync';
import { afterAll, describe, expect, test } from 'vitest';
import { EXIT, UserError } from '../../src/cli/shared/exit-codes.js';
import { runHash, type HashFlags, type HashIo } from '../../src/cli/hash/hash.js';
import { resolveInputArg } from '../../src/cli/shared/input-options.js';
import { buildProgram } from '../../src/cli/main.js';

const dir = mkdtempSync(join(tmpdir(), 'uid2-io-hash-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'bad-input');
let n = 0;
const path = (name: string) => join(dir, `${++n}-${name}`);

function write(name: string, content: string): string {
  const p = path(name);
  writeFileSync(p, content);
  return p;
}

/** Runs `uid2-batch hash ...` in this process, as the CLI would. */
async function cli(...args: string[]): Promise<void> {
  await (await buildProgram()).parseAsync(['node', 'uid2-batch', 'hash', ...args]);
}

function readCsv(p: string): Record<string, string>[] {
  return parse(readFileSync(p, 'utf8'), { columns: true }) as Record<string, string>[];
}

const sha = (s: string) => createHash('sha256').update(s, 'utf8').digest('base64');

/** docs/wire-protocol.md §6.4 and §7: input -> base64 SHA-256 of the normalized value. */
const VECTORS: Array<[string, string]> = [
  ['USER@example.com', 'tMmiiTI7IaAcPpQPFQ65uMVCWH8av9jw4cwf/F5HVRQ='],
  ['MyEmail@example.com', 'FsGNM28LJQ8OLZB0Us65ZYp07NrovJSGTCMSKnLMJ6U='],
  ['My.Email@example.com', '4itTvG+HEnTzpiqzejyu1yFPwU1nYhWpaiQvz62hyB8='],
  ['JaneSaoirse+Work@example.com', 'KKruSBUjDNO069iMUVImVQZm6RrAGZKeOtrD9mwogYA='],
  ['Jane.Saoirse@gmail.com', 'ku4mBX7Z3qJTXWyLFB1INzkyR2WZGW4ANSJUiW21iI8='],
  ['JaneSaoirse+Work@gmail.com', 'ku4mBX7Z3qJTXWyLFB1INzkyR2WZGW4ANSJUiW21iI8='],
  ['JANESaoirse@gmail.com', 'ku4mBX7Z3qJTXWyLFB1INzkyR2WZGW4ANSJUiW21iI8='],
  ['TEst.TEST@Test.com ', 'dvECjPKZHya0/SIhSGwP0m8SgTv1vzLxPULUOsm880M='],
  ['TEst.TEst+123@GMail.Com', 'LkLfFrut8Tc3h/fIvYDiBKSbaMiau/DtaLBPQYszdMw='],
  ['test+test@gmail.com', 'h5JGBrQTGorO7q6IaFMfu5cSqqB6XTp1aybOD11spnQ='],
  ['+test@test.com', 'weFizOVVWKlLfyorbBU8oxYDv4HJtTZCPMyZ4THzUQE='],
  ['  testtest@test.com  ', 'd1Lr/s4GLLX3SvQVMoQdIMfbQPMAGZYry+2V+0pZlQg='],
  ['😊testtest@test.com', 'fAFEUqApQ0V/M9mLj/IO54CgKgtQuARKsOMqtFklD4k='],
  ['foo@bar.com', 'DH5qQFhi5ALrdqcPiib8cy0Hwykx6frpqxWCkR0uijs='],
  ['+12345678901', 'EObwtHBUqDNZR33LNSMdtt5cafsYFuGmuY4ZLenlue4='],
  ['+441234567890', 'Rx8SW4ZyKqbPypXmswDNuq0SPxStFXBTG/yvPns/2NQ='],
  ['user2@example.com', 'KzsrnOhCq4tqbGFMsflgS7ig1QLRr0nFJrcrEIlOlbU='],
  ['optout@example.com', 'DYsnJ8r5+cjRDHue98gIGDKvLIMuqAm/RRLODrjqK50='],
  ['+00000000000', '313yQvZOTb0vjjEU7sTO/UWxGPzVppIbCyQEJEnfxLo='],
  ['refresh-optout@example.com', 'NaNI8RU0bL1Jpp1jJLC5aJO/lchc6gGhgXQIAwJ7cV4='],
  ['+00000000002', '0VoxsIuk88qt7TnZaTC//C9Vur3pR1zBMIr1cJe7xjE='],
  ['validate@example.com', 'ntI244ZRTXwAwpki6/M5cyBYW7h/Wq576lnN3l9+W/c='],
];

function fakeIo(stdinText = ''): HashIo & { out: () => string; err: () => string } {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const outParts: Buffer[] = [];
  const errParts: Buffer[] = [];
  stdout.on('data', (c: Buffer) => outParts.push(c));
  stderr.on('data', (c: Buffer) => errParts.push(c));
  return {
    stdin: Readable.from([Buffer.from(stdinText)]),
    stdout,
    stderr,
    now: () => 0,
    onInterrupt: () => () => undefined,
    out: () => Buffer.concat(outParts).toString('utf8'),
    err: () => Buffer.concat(errParts).toString('utf8'),
  };
}

describe('uid2-batch hash', () => {
  test('every published vector through the command, one auto column of emails and phones', async () => {
    const input = write('vectors.csv', `n,value\n${VECTORS.map(([v], i) => `${i},${v}`).join('\n')}\n`);
    const out = path('vectors.out.csv');
    await cli(input, '--col', 'value', '-o', out, '--quiet');
    const rows = readCsv(out);
    expect(rows.map((r) => r.hash)).toEqual(VECTORS.map(([, h]) => h));
    expect(rows.every((r) => r.status === 'ok' && r.reason === '')).toBe(true);
    expect(rows.map((r) => r.hash_type)).toEqual(VECTORS.map(([v]) => (v.includes('@') ? 'email' : 'phone')));
    expect(rows.map((r) => r.value)).toEqual(VECTORS.map(([v]) => v));
  });

  test('output = input columns + hash, hash_type, status, reason; invalid rows are data (exit 0); summary JSON', async () => {
    const input = write(
      'mixed.csv',
      'id,email,city\n1,Foo@Bar.com,Paris\n2,not-an-email,Rome\n3,,Oslo\n1,Foo@Bar.com,Paris\n',
    );
    const out = path('mixed.out.csv');
    const summaryPath = path('summary.json');
    process.exitCode = undefined;
    await cli(input, '-o', out, '--summary-json', summaryPath, '--quiet');
    expect(process.exitCode).toBeUndefined();
    expect(readFileSync(out, 'utf8').split('\n')[0]).toBe('id,email,city,hash,hash_type,status,reason');
    expect(readCsv(out)).toEqual([
      {
        id: '1',
        email: 'Foo@Bar.com',
        city: 'Paris',
        hash: sha('foo@bar.com'),
        hash_type: 'email',
        status: 'ok',
        reason: '',
      },
      {
        id: '2',
        email: 'not-an-email',
        city: 'Rome',
        hash: '',
        hash_type: '',
        status: 'invalid',
        reason: 'invalid email',
      },
      { id: '3', email: '', city: 'Oslo', hash: '', hash_type: '', status: 'missing', reason: 'empty' },
      {
        id: '1',
        email: 'Foo@Bar.com',
        city: 'Paris',
        hash: sha('foo@bar.com'),
        hash_type: 'email',
        status: 'ok',
        reason: '',
      },
    ]);
    const summary = JSON.parse(readFileSync(summaryPath, 'utf8')) as Record<string, unknown>;
    expect(summary).toMatchObject({
      command: 'hash',
      rows: 4,
      status: { ok: 2, invalid: 1, missing: 1 },
      columns: { email: { kind: 'email', ok: 2, invalid: 1 } },
      invalid_reasons: { 'invalid email': 1 },
    });
  });

  test('several identifier columns: result columns prefixed with the column name; a shifted row is invalid', async () => {
    const input = write(
      'two.csv',
      'id,email,phone\n1,a@example.com,+14155550100\n2,b@example.com,555-0100\n3,c@example.com,+1,4155550100\n',
    );
    const out = path('two.out.jsonl');
    await cli(input, '--email-col', 'email', '--phone-col', 'phone', '-o', out, '--quiet');
    const lines = readFileSync(out, 'utf8')
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, string>);
    expect(Object.keys(lines[0])).toEqual([
      'id',
      'email',
      'phone',
      'email_hash',
      'email_hash_type',
      'email_status',
      'email_reason',
      'phone_hash',
      'phone_hash_type',
      'phone_status',
      'phone_reason',
    ]);
    expect(lines[0]).toMatchObject({
      email_hash: sha('a@example.com'),
      phone_hash: sha('+14155550100'),
      email_status: 'ok',
      phone_status: 'ok',
    });
    expect(lines[1]).toMatchObject({
      email_status: 'ok',
      phone_status: 'invalid',
      phone_reason: expect.stringMatching(/^invalid phone/),
    });
    expect(lines[2]).toMatchObject({
      email_status: 'invalid',
      phone_status: 'invalid',
      email_reason: expect.stringMatching(/row has 4 cells, header has 3/),
    });
  });

  test('email quirks of §5.1: ok exactly when the fixture gives a normalized form, hashed from it', async () => {
    const out = path('quirks.out.csv');
    await cli(join(FIXTURES, 'email-quirks.csv'), '--email-col', 'email', '-o', out, '--quiet');
    const rows = readCsv(out);
    expect(rows).toHaveLength(28);
    for (const r of rows) {
      // an empty cell has nothing to hash: `missing`, as map reports it; every other cell without a normal form is invalid
      if (r.normalized === '')
        expect({ id: r.id, status: r.status }).toEqual({ id: r.id, status: r.email === '' ? 'missing' : 'invalid' });
      else
        expect({ id: r.id, status: r.status, hash: r.hash }).toEqual({
          id: r.id,
          status: 'ok',
          hash: sha(r.normalized),
        });
    }
  });

  test('phones of §5.2 and hashes of §5.3 (43/45 chars, 63/65 hex) as the fixtures expect', async () => {
    const phones = path('phones.out.csv');
    await cli(join(FIXTURES, 'invalid-phones.csv'), '--phone-col', 'phone', '-o', phones, '--quiet');
    for (const r of readCsv(phones))
      expect([r.id, r.status]).toEqual([r.id, r.valid === '1' ? 'ok' : r.phone === '' ? 'missing' : 'invalid']);
    const hashes = path('hashes.out.csv');
    await cli(join(FIXTURES, 'hash-lengths.csv'), '--email-hash-col', 'email_hash', '-o', hashes, '--quiet');
    for (const r of readCsv(hashes)) {
      expect([r.id, r.status, r.hash]).toEqual([r.id, r.expected === '' ? 'invalid' : 'ok', r.expected]);
    }
  });

  test('order and duplicates are kept over many chunks', async () => {
    const emails = Array.from({ length: 12_000 }, (_, i) => `User${i % 5000}@Example.com`);
    const input = write('many.csv', `n,email\n${emails.map((e, i) => `${i},${e}`).join('\n')}\n`);
    const out = path('many.out.csv');
    await cli(input, '-o', out, '--quiet');
    const rows = readCsv(out);
    expect(rows.map((r) => r.n)).toEqual(emails.map((_, i) => String(i)));
    expect(rows[5003].hash).toBe(rows[3].hash);
    expect(rows[7].hash).toBe(sha('user7@example.com'));
  });

  test('bad input: one UserError naming file and line (exit 1), no cell content, no output and no temp file', async () => {
    const out = path('bad.out.csv');
    const err = await cli(join(FIXTURES, 'invalid-utf8.csv'), '-o', out, '--quiet').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UserError);
    expect((err as UserError).exitCode).toBe(EXIT.failed);
    expect((err as UserError).message).toMatch(/invalid-utf8\.csv: line 4: invalid UTF-8/);
    expect((err as UserError).message).not.toContain('@example.com');
    expect(existsSync(out)).toBe(false);
    expect(readdirSync(dir).filter((f) => f.endsWith('.tmp'))).toEqual([]);
  });

  test('a missing identifier column is a usage error (exit 2) listing the columns', async () => {
    const err = await cli(join(FIXTURES, 'missing-identifier-column.csv'), '--quiet').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UserError);
    expect((err as UserError).exitCode).toBe(EXIT.usage);
    expect((err as UserError).message).toContain("'id', 'name', 'signup_date'");
  });

  test('an empty input writes an empty output; a header-only input writes the header', async () => {
    const empty = path('empty.out.csv');
    await cli(join(FIXTURES, 'empty.csv'), '-o', empty, '--quiet');
    expect(readFileSync(empty, 'utf8')).toBe('');
    const headerOnly = path('header.out.csv');
    await cli(join(FIXTURES, 'header-only.csv'), '-o', headerOnly, '--quiet');
    expect(readFileSync(headerOnly, 'utf8')).toBe('id,email,hash,hash_type,status,reason\n');
  });

  test('stdin to stdout as JSONL, with the column note and summary on stderr', async () => {
    const io = fakeIo('id,phone\n1,+14155550100\n2,(415) 555-0100\n');
    const flags: HashFlags = { input: '-', format: 'jsonl' };
    const summary = await runHash(flags, io);
    expect(summary.status).toEqual({ ok: 1, invalid: 1, missing: 0 });
    const lines = io
      .out()
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, string | null>);
    // the tool's own columns are null where they have no value; input cells stay strings
    expect(lines.map((l) => [l.id, l.status, l.hash_type, l.reason])).toEqual([
      ['1', 'ok', 'phone', null],
      ['2', 'invalid', null, expect.stringMatching(/^invalid phone/)],
    ]);
    expect(io.err()).toContain("using column 'phone' as phone");
    expect(io.err()).toMatch(/hash: 2 rows .*: 1 ok, 1 invalid \(1 invalid phone\)/);
    expect(io.err()).not.toContain('415');
  });

  test('no INPUT: stdin when piped, a usage error on a terminal', () => {
    expect(resolveInputArg(undefined, { isTTY: false })).toBe('-');
    expect(resolveInputArg('x.csv', { isTTY: true })).toBe('x.csv');
    expect(() => resolveInputArg(undefined, { isTTY: true })).toThrow(/no input/);
  });

  test('--delimiter, --no-header and --encoding reach the source', async () => {
    const input = write('semi.csv', 'a@example.com;1\nb@example.com;2\n');
    const out = path('semi.out.csv');
    await cli(input, '--delimiter', ';', '--no-header', '--col', 'col1', '-o', out, '--quiet');
    expect(readCsv(out).map((r) => [r.col2, r.hash])).toEqual([
      ['1', sha('a@example.com')],
      ['2', sha('b@example.com')],
    ]);
    const latin = path('latin.csv');
    writeFileSync(
      latin,
      Buffer.concat([Buffer.from('name,email\nRen'), Buffer.from([0xe9]), Buffer.from(',r@example.com\n')]),
    );
    const latinOut = path('latin.out.csv');
    await cli(latin, '--encoding', 'latin1', '-o', latinOut, '--quiet');
    expect(readCsv(latinOut)[0]).toMatchObject({ name: 'René', status: 'ok' });
  });
});
