import { stringify } from 'csv-stringify/sync';
import { describe, expect, it } from 'vitest';
import { parse } from 'csv-parse/sync';
import { CSV_OPTIONS, encodeCsvRow, rowEncoder } from '../../src/pipeline/io/output/row-encoders.js';
import { seeded } from '../helpers/seeded-random.js';

/** What csv-stringify alone writes with the output's options: every row through it. */
const reference = (rows: readonly (readonly (string | undefined)[])[]): string =>
  stringify(rows as string[][], CSV_OPTIONS);

const SPECIAL = ['"', ',', '\n', '\r', '\r\n', '""', ' ', '\t', ';', "'", '=', '\u0000', '\u2028', '\ufeff'];
const PLAIN = [
  'a',
  'Zoë',
  'Ångström',
  '€',
  '日本',
  '😀',
  '\ud83d',
  'mapped',
  'optout',
  '2022-03-07',
  'C0000001',
  'user@example.com',
  '+15551234567',
  '0042',
  '-1',
  '1e5',
  '3.14',
  'NaN',
  ' padded ',
  '=SUM(A1)',
  '@x',
  'tZ3qhB9Xv/0kJ7T+o2yVbq4u8LrE1mWcN5sD6aFgH0k=',
];

function randomCell(rand: () => number): string | undefined {
  const roll = rand();
  if (roll < 0.08) return '';
  if (roll < 0.1) return undefined;
  if (roll < 0.12) return 'x'.repeat(200 + Math.floor(rand() * 2000)) + (rand() < 0.5 ? ',' : '');
  let cell = '';
  const parts = 1 + Math.floor(rand() * 5);
  for (let i = 0; i < parts; i++) {
    const pool = rand() < 0.25 ? SPECIAL : PLAIN;
    cell += pool[Math.floor(rand() * pool.length)];
  }
  return cell;
}

/** About half the rows hold only plain cells, so rows for both paths interleave, singly and in runs. */
function randomRow(rand: () => number): (string | undefined)[] {
  const width = Math.floor(rand() * 26);
  const plainOnly = rand() < 0.5;
  const row: (string | undefined)[] = [];
  for (let c = 0; c < width; c++) {
    row.push(plainOnly ? PLAIN[Math.floor(rand() * PLAIN.length)] : randomCell(rand));
  }
  return row;
}

function randomRows(seed: number, count: number): (string | undefined)[][] {
  const rand = seeded(seed);
  return Array.from({ length: count }, () => randomRow(rand));
}

const encode = rowEncoder({ format: 'csv' });

describe('CSV fast path against csv-stringify', () => {
  it('encodes 24,000 seeded random rows exactly as csv-stringify, chunk by chunk', () => {
    const rand = seeded(7);
    const rows = randomRows(20240307, 24_000);
    let quotedRows = 0;
    let plainRows = 0;
    for (let start = 0; start < rows.length; ) {
      const size = Math.floor(rand() * 700);
      const chunk = rows.slice(start, start + size);
      start += size;
      expect(encode(chunk as string[][])).toBe(reference(chunk));
      for (const row of chunk) {
        if (reference([row]) === `${row.join(',')}\n`) plainRows++;
        else quotedRows++;
      }
    }
    // the data must drive both paths, or the comparison above proves little
    expect(plainRows).toBeGreaterThan(5_000);
    expect(quotedRows).toBeGreaterThan(5_000);
  });

  it('encodeCsvRow gives each random row what csv-stringify gives it', () => {
    for (const row of randomRows(99, 5_000)) expect(encodeCsvRow(row)).toBe(reference([row]));
  });

  it.each<[string, (string | undefined)[][]]>([
    ['one empty cell', [['']]],
    ['a row of zero cells', [[]]],
    ['no rows at all', []],
    ['two empty cells', [['', '']]],
    ['absent cells', [[undefined], ['a', undefined, 'b'], [undefined, undefined]]],
    ['a header row', [['id', 'email', 'phone', 'raw_uid', 'bucket_id', 'status']]],
    ['a header needing quotes', [['id', 'name, full', 'say "hi"']]],
    ['only quoting characters', [['"'], [','], ['\n'], ['\r'], ['\r\n'], ['""']]],
    ['a lone carriage return', [['a\rb', 'c']]],
    ['a carriage return at either end', [['\rb', 'c\r'], ['\r']]],
    ['spaces, tabs and formulas stay bare', [[' a ', '\t', '=1+2', '+1555', '-3', '@x']]],
    ['astral and lone surrogates', [['😀', '\ud83d', '\ude00x']]],
    ['runs of both kinds', [['a'], ['b,c'], ['"d"'], ['e'], ['f\ng'], ['h'], ['i', 'j']]],
    ['rows of different widths', [[], ['a'], ['a', 'b'], ['a,b'], ['a', 'b', 'c'], []]],
    ['a wide row', [Array.from({ length: 3000 }, (_, i) => `c${i}`)]],
    ['a wide row with a comma at the end', [Array.from({ length: 3000 }, (_, i) => (i === 2999 ? 'x,' : `c${i}`))]],
  ])('%s', (_name, rows) => {
    expect(encode(rows as string[][])).toBe(reference(rows));
    expect(rows.map((row) => encodeCsvRow(row)).join('')).toBe(reference(rows));
  });
});

describe('CSV output reads back as written', () => {
  it('quotes a lone carriage return, so a reader that takes CR as a line break keeps the row whole', () => {
    const rows = [
      ['1', 'a\rb', 'c'],
      ['2', 'line\r\nbreak', 'x,y'],
      ['3', '"q"', '\r'],
    ];
    const text = rowEncoder({ format: 'csv' })(rows);
    expect(text).toBe('1,"a\rb",c\n2,"line\r\nbreak","x,y"\n3,"""q""","\r"\n');
    // the options this tool's own reader uses (source.ts)
    expect(parse(text, { record_delimiter: ['\r\n', '\n', '\r'], relax_quotes: true })).toEqual(rows);
  });
});
