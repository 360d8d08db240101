import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import { stringify } from 'csv-stringify/sync';
import { afterAll, describe, expect, test } from 'vitest';
import { buildProgram } from '../../src/cli/main.js';
import { outputFlags } from '../../src/cli/shared/options.js';
import { formatOfExtension, outputFormatOf } from '../../src/pipeline/io/format-names.js';
import { rowEncoder } from '../../src/pipeline/io/output/row-encoders.js';
import { openSink } from '../../src/pipeline/io/output/sink.js';
import { encodeTsvRow } from '../../src/pipeline/io/output/tsv-encoder.js';
import { defaultResultPrefixes, sanitizedName } from '../../src/pipeline/map/identifier-columns.js';
import { timeCell, timeCellOfMs } from '../../src/pipeline/io/typed-cells.js';

const dir = mkdtempSync(join(tmpdir(), 'uid2-output-formats-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
const file = (name: string) => join(dir, `${++n}-${name}`);

describe('outputFormatOf: --format, else the extension of -o, else csv', () => {
  test.each([
    ['out.csv', undefined, 'csv'],
    ['out.CSV', undefined, 'csv'],
    ['out.tsv', undefined, 'tsv'],
    ['dir.v2/out.TAB', undefined, 'tsv'],
    ['out.jsonl', undefined, 'jsonl'],
    ['out.ndjson', undefined, 'jsonl'],
    ['out.jsonl.gz', undefined, 'jsonl'],
    ['out.txt', undefined, 'csv'],
    ['out', undefined, 'csv'],
    ['dir.jsonl/out', undefined, 'csv'],
    ['.jsonl', undefined, 'csv'],
    [undefined, undefined, 'csv'],
    ['-', undefined, 'csv'],
    [undefined, 'jsonl', 'jsonl'],
    [undefined, 'ndjson', 'jsonl'],
    ['out.jsonl', 'csv', 'csv'],
    ['out.csv', 'tsv', 'tsv'],
    ['out.tsv', 'jsonl', 'jsonl'],
    ['out.parquet', undefined, 'parquet'],
    ['OUT.PARQUET', undefined, 'parquet'],
    ['out.csv', 'parquet', 'parquet'],
    ['out.parquet', 'csv', 'csv'],
    ['out.csv.gz', undefined, 'csv'],
  ] as const)('-o %s --format %s -> %s', (path, flag, expected) => {
    expect(outputFormatOf(path, flag)).toBe(expected);
  });

  test('an extension that names no format is undefined, not a guess', () => {
    expect(formatOfExtension('x.parquet.tmp')).toBeUndefined();
    expect(formatOfExtension('C:\\data.tsv\\out')).toBeUndefined();
  });

  test('outputFlags applies it to what commander parsed', () => {
    expect(outputFlags({ output: 'x.tsv' }).format).toBe('tsv');
    expect(outputFlags({ output: 'x.ndjson' }).format).toBe('jsonl');
    expect(outputFlags({ output: 'x.ndjson', format: 'csv' }).format).toBe('csv');
    expect(outputFlags({ output: '-' }).format).toBe('csv');
    expect(outputFlags({}).format).toBe('csv');
    expect(outputFlags({ output: 'x.parquet' }).format).toBe('parquet');
    expect(outputFlags({ output: 'x.csv', compress: 'gzip' }).compress).toBe('gzip');
    expect(outputFlags({ output: 'x.csv.gz' }).compress).toBeUndefined();
  });

  test('a Parquet output that cannot be written is refused by outputFlags', () => {
    expect(() => outputFlags({ format: 'parquet' })).toThrow(/Parquet cannot be written to stdout/);
    expect(() => outputFlags({ output: 'x.parquet.gz' })).toThrow(/not gzipped as a whole/);
    expect(() => outputFlags({ output: 'x.parquet', compress: 'gzip' })).toThrow(/--compress gzip does not apply/);
    expect(outputFlags({ output: 'x.parquet', compress: 'none' }).format).toBe('parquet');
  });
});

const TRICKY: string[][] = [
  ['1', 'plain', ''],
  ['2', 'has\ttab', 'has "quotes"'],
  ['3', 'multi\nline', 'cr\ronly'],
  ['4', 'has,comma', '  spaced  '],
  ['5', '"', 'Zoë 😊'],
  ['6', '', '='],
];

describe('TSV rows', () => {
  test('the bytes csv-stringify writes with a tab delimiter, and they read back with a tab delimiter', () => {
    const text = TRICKY.map((r) => encodeTsvRow(r)).join('');
    expect(text).toBe(stringify(TRICKY, { delimiter: '\t', eof: true, record_delimiter: '\n', quoted_match: /\r/ }));
    expect(parse(text, { delimiter: '\t' })).toEqual(TRICKY);
    // a comma needs no quoting in TSV
    expect(encodeTsvRow(['a,b', 'c'])).toBe('a,b\tc\n');
    expect(encodeTsvRow(['x', undefined, 'y'])).toBe('x\t\ty\n');
    expect(rowEncoder({ format: 'tsv' })(TRICKY)).toBe(text);
  });

  test('a TSV sink writes the header line first, a BOM when asked', async () => {
    const path = file('out.tsv');
    const sink = await openSink({ path, format: 'tsv', header: ['id', 'a b', 'c\td'], bom: true });
    await sink.writeRows(TRICKY.map((r) => [...r]));
    await sink.commit();
    const text = readFileSync(path, 'utf8');
    expect(text.startsWith('\ufeffid\ta b\t"c\td"\n')).toBe(true);
    expect(parse(text.slice(1), { delimiter: '\t' })).toEqual([['id', 'a b', 'c\td'], ...TRICKY]);
  });
});

describe('the hash command writes the format -o names', () => {
  const input = (): string => {
    const p = file('in.csv');
    writeFileSync(p, 'id,email\n1,a@example.com\n2,"x\ty"\n');
    return p;
  };
  const hash = async (...args: string[]) =>
    (await buildProgram()).parseAsync(['node', 'uid2-batch', 'hash', '--quiet', '--threads', '0', ...args]);

  test('-o x.tsv: tab-separated, header first', async () => {
    const out = file('hashed.tsv');
    await hash(input(), '-o', out);
    const rows = parse(readFileSync(out, 'utf8'), { delimiter: '\t' }) as string[][];
    expect(rows[0]).toEqual(['id', 'email', 'hash', 'hash_type', 'status', 'reason']);
    expect(rows[1].slice(0, 2)).toEqual(['1', 'a@example.com']);
    expect(rows[1][4]).toBe('ok');
    expect(rows[2].slice(0, 2)).toEqual(['2', 'x\ty']);
    expect(rows[2][4]).toBe('invalid');
  });

  test('--keep and --drop-input-columns: only the input columns asked for', async () => {
    const kept = file('kept.csv');
    await hash(input(), '-o', kept, '--keep', 'id');
    expect(parse(readFileSync(kept, 'utf8'))).toEqual([
      ['id', 'hash', 'hash_type', 'status', 'reason'],
      ['1', expect.stringMatching(/^[A-Za-z0-9+/]{43}=$/), 'email', 'ok', ''],
      ['2', '', '', 'invalid', 'invalid email'],
    ]);
    const none = file('none.csv');
    await hash(input(), '-o', none, '--drop-input-columns');
    expect(readFileSync(none, 'utf8').split('\n')[0]).toBe('hash,hash_type,status,reason');
    await expect(hash(input(), '-o', file('x.csv'), '--keep', 'nope')).rejects.toThrow(
      /--keep: .* has no column 'nope'/,
    );
  });

  test('-o x.ndjson: JSON Lines; --format csv overrides the extension', async () => {
    const jsonl = file('hashed.ndjson');
    await hash(input(), '-o', jsonl);
    const lines = readFileSync(jsonl, 'utf8').trim().split('\n');
    expect(JSON.parse(lines[0])).toMatchObject({ id: '1', email: 'a@example.com', hash_type: 'email', status: 'ok' });
    const csv = file('hashed.ndjson');
    await hash(input(), '-o', csv, '--format', 'csv');
    expect(readFileSync(csv, 'utf8').split('\n')[0]).toBe('id,email,hash,hash_type,status,reason');
  });
});

describe('typed JSONL', () => {
  const header = ['in', 'text', 'n', 'flag', 'unix', 'iso'];
  const encode = rowEncoder({
    format: 'jsonl',
    header,
    types: ['input', 'string', 'integer', 'boolean', 'unix_time', 'iso_time'],
  });
  const parsed = (rows: string[][]) =>
    encode(rows)
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);

  test("input cells are strings as read; the tool's empty cells are null, numbers and booleans bare", () => {
    expect(parsed([['007', 'x', '1801785600', 'true', '0', '2027-01-05T00:00:00Z']])).toEqual([
      { in: '007', text: 'x', n: 1801785600, flag: true, unix: 0, iso: '2027-01-05T00:00:00Z' },
    ]);
    expect(parsed([['', '', '', '', '', '']])).toEqual([
      { in: '', text: null, n: null, flag: null, unix: null, iso: null },
    ]);
    expect(parsed([['02134', 'a "b"\n', '-5', 'false', '-1', 'z']])[0]).toMatchObject({
      in: '02134',
      text: 'a "b"\n',
      n: -5,
      flag: false,
      unix: -1,
    });
  });

  test('a cell that is not what its type says stays a string: every line is valid JSON', () => {
    const rows = [['x', 'y', '007', 'yes', '1e3', '']];
    expect(encode(rows)).toBe('{"in":"x","text":"y","n":"007","flag":"yes","unix":"1e3","iso":null}\n');
  });

  test('without types every cell is a string, as before', () => {
    expect(rowEncoder({ format: 'jsonl', header: ['a', 'b'] })([['', '1']])).toBe('{"a":"","b":"1"}\n');
  });
});

describe('times and names', () => {
  test('timeCell: decimal seconds, or ISO 8601 UTC to the second with Z', () => {
    expect(timeCell(1801785600, 'unix')).toBe('1801785600');
    expect(timeCell(1801785600, 'iso')).toBe('2027-02-05T00:00:00Z');
    expect(timeCell(0, 'iso')).toBe('1970-01-01T00:00:00Z');
    expect(timeCell(1801785600.9, 'unix')).toBe('1801785600');
    expect(timeCellOfMs(1801785600999, 'iso')).toBe('2027-02-05T00:00:00Z');
    // a time no Date can hold is written as its number rather than failing the run
    expect(timeCell(1e15, 'iso')).toBe('1000000000000000');
  });

  test('sanitizedName: spaces and punctuation as one _, none at the ends, case kept', () => {
    expect(sanitizedName('Email Address')).toBe('Email_Address');
    expect(sanitizedName(' E-Mail (work) ')).toBe('E_Mail_work');
    expect(sanitizedName('Phone #')).toBe('Phone');
    expect(sanitizedName('courriel_pro')).toBe('courriel_pro');
    expect(sanitizedName('Téléphone')).toBe('Téléphone');
    expect(defaultResultPrefixes([{ name: 'Email Address' }])).toEqual(['']);
    expect(defaultResultPrefixes([{ name: 'Email Address' }, { name: '#' }])).toEqual([
      'Email_Address_',
      'identifier2_',
    ]);
  });
});
