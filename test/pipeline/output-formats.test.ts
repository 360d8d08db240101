import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import { stringify } from 'csv-stringify/sync';
import { afterAll, describe, expect, test } from 'vitest';
import { buildProgram } from '../../src/cli/main.js';
import { outputFlags } from '../../src/cli/shared/options.js';
import { formatOfExtension, outputFormatOf } from '../../src/pipeline/table/format-names.js';
import { rowEncoder } from '../../src/pipeline/table/row-encoders.js';
import { openSink } from '../../src/pipeline/table/sink.js';
import { encodeTsvRow } from '../../src/pipeline/table/tsv-encoder.js';

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
  const hash = (...args: string[]) => buildProgram().parseAsync(['node', 'uid2-batch', 'hash', '--quiet', '--threads', '0', ...args]);

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
