import { Readable } from 'node:stream';
import { parse } from 'csv-parse/sync';
import { describe, expect, test } from 'vitest';
import { parseCsvPiece } from '../../src/pipeline/io/csv/csv-records.js';
import { fitRow } from '../../src/pipeline/io/csv/fit-row.js';
import { CsvPieceCutter, type CsvPiece } from '../../src/pipeline/io/csv/piece-cutter.js';
import { CsvSyntaxError, tokenizeCsv } from '../../src/pipeline/io/csv/tokenizer.js';
import { openSource } from '../../src/pipeline/io/source.js';
import { InputError, type InputRow, type SourceProblemCounts } from '../../src/pipeline/io/table.js';
import { csvParseOptions as csvOptions, oracleRecords } from '../helpers/csv-oracle.js';
import { seeded } from '../helpers/seeded-random.js';
import { settled } from '../helpers/settled-reading.js';
import { settleInput } from '../../src/pipeline/jobs/run-input.js';

type Parsed = { ok: true; records: string[][] } | { ok: false; code: string };

function parseAll(bytes: Buffer, delimiter: string): Parsed {
  try {
    return { ok: true, records: parse(bytes, csvOptions(delimiter)) as string[][] };
  } catch (err) {
    return { ok: false, code: String((err as { code?: string }).code) };
  }
}

const BREAKS = ['\n', '\r\n', '\r'];
// multi-byte text, including '¨' (C2 A8), which shares its first byte with '§' (C2 A7)
const TEXT = ['a', 'b', 'z', '0', '7', ' ', 'é', '¨', '😀', '@', '.', '-', ',', ';', '§', '\t'];

function generateCsv(rnd: () => number, delimiter: string, withQuotes: boolean): string {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)];
  const text = (max: number): string => {
    let s = '';
    const n = Math.floor(rnd() * (max + 1));
    for (let i = 0; i < n; i++) s += pick(TEXT);
    return s;
  };
  const quotedContent = (): string => {
    let s = '';
    const parts = Math.floor(rnd() * 5);
    for (let i = 0; i < parts; i++) s += pick(['""', delimiter, ...BREAKS, text(6), text(6)]);
    return s;
  };
  const field = (): string => {
    if (!withQuotes) return text(rnd() < 0.05 ? 400 : 8);
    const r = rnd();
    if (r < 0.35) return text(8);
    if (r < 0.6) return `"${quotedContent()}"`;
    if (r < 0.68) return `${text(3)}a"${text(3)}`; // O"Brien: a stray quote inside an unquoted value
    if (r < 0.74) return `"${quotedContent()}"${pick(['x', ' ', '"', 'é'])}${text(3)}`; // junk after the closing quote
    if (r < 0.78) return ` "${text(3)}"`; // a quote after a space is not at the start of the field
    if (r < 0.82) return '""';
    if (r < 0.86) return `"${text(2)}""`; // ends in an escaped quote: the value continues
    if (r < 0.9) return '"';
    return '';
  };
  let out = '';
  const lines = Math.floor(rnd() * 25);
  for (let l = 0; l < lines; l++) {
    if (rnd() < 0.12) {
      out += pick(BREAKS); // an empty line
      continue;
    }
    const n = 1 + Math.floor(rnd() * 5);
    const fields: string[] = [];
    for (let f = 0; f < n; f++) fields.push(field());
    out += fields.join(delimiter);
    if (l < lines - 1 || rnd() < 0.6) out += pick(BREAKS);
  }
  return out;
}

/** Splits `bytes` into pushes of 1 byte to 4 KB, never inside a UTF-8 character. */
function pushSizes(rnd: () => number, bytes: Buffer): Buffer[] {
  const out: Buffer[] = [];
  // a third of the files only in tiny pushes, so pieces span dozens of pushes
  const small = rnd() < 0.33 ? 1 : 0.6;
  let at = 0;
  while (at < bytes.length) {
    const want = rnd() < small ? 1 + Math.floor(rnd() * 8) : 1 + Math.floor(rnd() * 4096);
    let end = Math.min(bytes.length, at + want);
    while (end < bytes.length && (bytes[end] & 0xc0) === 0x80) end++;
    out.push(bytes.subarray(at, end));
    at = end;
  }
  return out;
}

/** Line of the byte at `offset`, counted the slow, obvious way. */
function naiveLine(bytes: Buffer, offset: number): number {
  let line = 1;
  for (let i = 0; i < offset; i++) {
    if (bytes[i] === 10 || (bytes[i] === 13 && bytes[i + 1] !== 10)) line++;
  }
  return line;
}

interface Cut {
  piece: CsvPiece;
  how: 'record' | 'next' | 'finish';
}

function cutAll(cutter: CsvPieceCutter, pushes: Buffer[], headerFirst: boolean): Cut[] {
  const cuts: Cut[] = [];
  let wantHeader = headerFirst;
  for (const buf of pushes) {
    cutter.push(buf);
    if (wantHeader) {
      const header = cutter.nextRecord();
      if (header === undefined) continue;
      cuts.push({ piece: header, how: 'record' });
      wantHeader = false;
    }
    for (let piece = cutter.next(); piece !== undefined; piece = cutter.next()) cuts.push({ piece, how: 'next' });
  }
  const last = cutter.finish();
  if (last !== undefined) cuts.push({ piece: last, how: 'finish' });
  return cuts;
}

function checkFile(seed: number, delimiter: string): void {
  const rnd = seeded(seed);
  const input = Buffer.from(generateCsv(rnd, delimiter, rnd() > 0.1), 'utf8');
  const target = 1 + Math.floor(rnd() * 200);
  const headerFirst = rnd() < 0.3;
  const cuts = cutAll(new CsvPieceCutter(delimiter, target, 'utf8'), pushSizes(rnd, input), headerFirst);
  const where = `seed ${seed}, delimiter ${JSON.stringify(delimiter)}, target ${target}`;

  expect(Buffer.concat(cuts.map((c) => c.piece.bytes)).equals(input), where).toBe(true);
  let offset = 0;
  for (const [k, { piece, how }] of cuts.entries()) {
    expect(piece.bytes.length, where).toBeGreaterThan(0);
    expect(piece.startOffset, where).toBe(offset);
    expect(piece.startLine, where).toBe(naiveLine(input, offset));
    offset += piece.bytes.length;
    if (how !== 'finish') {
      const lastByte = piece.bytes[piece.bytes.length - 1];
      expect(lastByte === 10 || lastByte === 13, where).toBe(true);
      expect(lastByte === 13 && input[offset] === 10, `${where}: cut inside a CRLF`).toBe(false);
    }
    if (how === 'next') expect(piece.bytes.length, where).toBeGreaterThanOrEqual(target);
    if (how === 'record') expect(k, where).toBe(0);
  }

  const whole = parseAll(input, delimiter);
  const parts = cuts.map((c) => parseAll(c.piece.bytes, delimiter));
  if (!whole.ok) {
    expect(
      parts.some((p) => !p.ok),
      `${where}: the whole input fails (${whole.code}) but no piece does`,
    ).toBe(true);
    return;
  }
  const records: string[][] = [];
  for (const p of parts) {
    expect(p.ok, `${where}: a piece fails to parse`).toBe(true);
    if (p.ok) records.push(...p.records);
  }
  expect(records, where).toEqual(whole.records);
  if (cuts[0]?.how === 'record') {
    const first = parts[0];
    expect(first.ok && first.records, where).toEqual([whole.records[0]]);
  }
}

describe('CsvPieceCutter against csv-parse on random files', () => {
  for (const [d, delimiter] of [',', ';', '\t', '§'].entries()) {
    test(`delimiter ${JSON.stringify(delimiter)}: 800 files`, () => {
      for (let n = 0; n < 800; n++) checkFile(1000 * (d + 1) + n, delimiter);
    });
  }

  test('the generator makes the cases it is meant to (failing inputs, quotes, no quotes)', () => {
    let failing = 0;
    let quoteFree = 0;
    let junkAfterQuote = 0;
    for (let seed = 1000; seed < 1800; seed++) {
      const rnd = seeded(seed);
      const text = generateCsv(rnd, ',', rnd() > 0.1);
      if (!parseAll(Buffer.from(text), ',').ok) failing++;
      if (!text.includes('"')) quoteFree++;
      if (/"[^",\r\n]*"[x é]/.test(text)) junkAfterQuote++;
    }
    expect(failing).toBeGreaterThan(20);
    expect(quoteFree).toBeGreaterThan(40);
    expect(junkAfterQuote).toBeGreaterThan(20);
  });
});

function cutString(text: string, pushes: string[] | undefined, target: number, delimiter = ','): CsvPiece[] {
  const cutter = new CsvPieceCutter(delimiter, target, 'utf8');
  const pieces: CsvPiece[] = [];
  for (const p of pushes ?? [text]) {
    cutter.push(Buffer.from(p));
    for (let piece = cutter.next(); piece !== undefined; piece = cutter.next()) pieces.push(piece);
  }
  const last = cutter.finish();
  if (last !== undefined) pieces.push(last);
  return pieces;
}

const texts = (pieces: CsvPiece[]) => pieces.map((p) => p.bytes.toString('utf8'));

describe('CsvPieceCutter.next', () => {
  test('cuts at the first line break at or past the target, not inside quoted values', () => {
    const pieces = cutString('a,b\n"x\ny",c\nd,e\r\nf\rg\n', undefined, 2);
    expect(texts(pieces)).toEqual(['a,b\n', '"x\ny",c\n', 'd,e\r\n', 'f\r', 'g\n']);
    expect(pieces.map((p) => [p.startOffset, p.startLine])).toEqual([
      [0, 1],
      [4, 2],
      [12, 4],
      [17, 5],
      [19, 6],
    ]);
  });

  test('does not cut after a CR that ends the pushed bytes until the next byte shows a lone CR or a CRLF', () => {
    const cutter = new CsvPieceCutter(',', 1, 'utf8');
    cutter.push(Buffer.from('a,b\r'));
    expect(cutter.next()).toBeUndefined();
    cutter.push(Buffer.from('\nc\r'));
    expect(cutter.next()?.bytes.toString()).toBe('a,b\r\n');
    expect(cutter.next()).toBeUndefined();
    cutter.push(Buffer.from('d'));
    const piece = cutter.next();
    expect([piece?.bytes.toString(), piece?.startLine, piece?.startOffset]).toEqual(['c\r', 2, 5]);
    expect(cutter.finish()?.bytes.toString()).toBe('d');
    expect(cutter.finish()).toBeUndefined();
  });

  test('waits for the byte after a quote inside a quoted value (escaped or closing)', () => {
    const cutter = new CsvPieceCutter(',', 1, 'utf8');
    cutter.push(Buffer.from('"a"'));
    expect(cutter.next()).toBeUndefined();
    cutter.push(Buffer.from('"\nb"\n'));
    expect(cutter.next()?.bytes.toString()).toBe('"a""\nb"\n');
    cutter.push(Buffer.from('"c"'));
    cutter.push(Buffer.from('\nd\n'));
    expect(cutter.next()?.bytes.toString()).toBe('"c"\n');
  });

  test('a quote opens a quoted value only at the start of a field', () => {
    // O"Brien and ' "' are literal; the quote after the delimiter opens a value holding a line break
    expect(texts(cutString('O"Brien,x\n "a\nb,"c\nd"\ne\n', undefined, 1))).toEqual([
      'O"Brien,x\n',
      ' "a\n',
      'b,"c\nd"\n',
      'e\n',
    ]);
    // a multi-byte delimiter, and a character sharing its first byte ('¨' is C2 A8, '§' is C2 A7)
    expect(texts(cutString('a§"b\nc"\n¨"d\ne\n', undefined, 1, '§'))).toEqual(['a§"b\nc"\n', '¨"d\n', 'e\n']);
  });

  test('after a closing quote followed by other text, the field goes on unquoted (as csv-parse reads it)', () => {
    expect(parse('"ab"c"d,e\n', csvOptions(','))).toEqual([['"ab"c"d', 'e']]);
    expect(texts(cutString('"ab"c"d,e\nf\n', undefined, 1))).toEqual(['"ab"c"d,e\n', 'f\n']);
  });

  test('an unclosed quote keeps the rest of the input in the last piece', () => {
    const cutter = new CsvPieceCutter(',', 1, 'utf8');
    cutter.push(Buffer.from('a\n"b\nc\nd\n'));
    expect(cutter.next()?.bytes.toString()).toBe('a\n');
    expect(cutter.next()).toBeUndefined();
    expect(cutter.pendingBytes).toBe(7);
    expect(cutter.finish()?.bytes.toString()).toBe('"b\nc\nd\n');
  });

  test('a piece spans many pushes and starts in the middle of one', () => {
    const rows = Array.from({ length: 200 }, (_, i) => `${i},"v\n${i}"\n`).join('');
    const chunks = rows.match(/[\s\S]{1,7}/g) ?? [];
    const pieces = cutString(rows, chunks, 100);
    expect(Buffer.concat(pieces.map((p) => p.bytes)).toString()).toBe(rows);
    expect(pieces.length).toBeGreaterThan(10);
    for (const p of pieces.slice(0, -1)) expect(p.bytes.length).toBeGreaterThanOrEqual(100);
    const records = pieces.flatMap((p) => parse(p.bytes, csvOptions(',')) as string[][]);
    expect(records).toEqual(parse(rows, csvOptions(',')));
  });

  test('a delimiter csv-parse could not use here is refused once, as the input is settled', async () => {
    for (const bad of [',,', '"', '\n', '\r'])
      await expect(settleInput(['in.csv'], { delimiter: bad })).rejects.toThrow(/delimiter/);
    expect((await settleInput(['in.csv'], { delimiter: '' })).reading.delimiter).toBe(',');
    expect(() => new CsvPieceCutter(',', 0, 'utf8')).toThrow(/targetBytes/);
  });
});

describe('CsvPieceCutter.nextRecord', () => {
  test('takes the leading empty lines and the first record, a quoted name with line breaks included', () => {
    const cutter = new CsvPieceCutter(',', 1, 'utf8');
    cutter.push(Buffer.from('\n\r\n\r"first\r\nname",b\r\n1,2\n'));
    const header = cutter.nextRecord();
    expect(header?.bytes.toString()).toBe('\n\r\n\r"first\r\nname",b\r\n');
    expect([header?.startLine, header?.startOffset]).toEqual([1, 0]);
    expect(parse(header?.bytes ?? Buffer.alloc(0), csvOptions(','))).toEqual([['first\r\nname', 'b']]);
    const rest = cutter.next();
    expect([rest?.bytes.toString(), rest?.startLine, rest?.startOffset]).toEqual(['1,2\n', 6, 21]);
  });

  test('is undefined until the first record is complete', () => {
    const cutter = new CsvPieceCutter(',', 1, 'utf8');
    cutter.push(Buffer.from('\n\n'));
    expect(cutter.nextRecord()).toBeUndefined();
    cutter.push(Buffer.from('"a\n'));
    expect(cutter.nextRecord()).toBeUndefined();
    cutter.push(Buffer.from('b",c'));
    expect(cutter.nextRecord()).toBeUndefined();
    cutter.push(Buffer.from('\r'));
    expect(cutter.nextRecord()).toBeUndefined(); // a CR or a CRLF: not known yet
    cutter.push(Buffer.from('\nx\n'));
    expect(cutter.nextRecord()?.bytes.toString()).toBe('\n\n"a\nb",c\r\n');
    expect(cutter.nextRecord()?.bytes.toString()).toBe('x\n');
    expect(cutter.nextRecord()).toBeUndefined();
  });

  test('next() after a header search that went past the target still cuts at the first break past it', () => {
    const cutter = new CsvPieceCutter(',', 4, 'utf8');
    cutter.push(Buffer.from('h1,h2\n'));
    expect(cutter.nextRecord()?.bytes.toString()).toBe('h1,h2\n');
    cutter.push(Buffer.from('\n\n\n\n\n\nab'));
    expect(cutter.nextRecord()).toBeUndefined();
    expect(cutter.next()?.bytes.toString()).toBe('\n\n\n\n');
  });

  test('next() after a header search that went past a quote still cuts at the first break past the target', () => {
    const cutter = new CsvPieceCutter(',', 4, 'utf8');
    cutter.push(Buffer.from('h1,h2\n'));
    expect(cutter.nextRecord()?.bytes.toString()).toBe('h1,h2\n');
    cutter.push(Buffer.from('\n\n\n\n\n\n"a\n'));
    expect(cutter.nextRecord()).toBeUndefined();
    expect(cutter.next()?.bytes.toString()).toBe('\n\n\n\n');
  });
});

/**
 * Every field quoted, as warehouse unloads write them, with what quoting is for: "" (an escaped quote), the
 * delimiter and line breaks of every kind inside values; rows of different widths, empty lines, line ends mixed.
 * `plain`: only whole-field quotes around ordinary text, the common case.
 */
function allQuotedCsv(rnd: () => number, delimiter: string, plain: boolean): string {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)];
  const text = (max: number): string => {
    let s = '';
    const n = Math.floor(rnd() * (max + 1));
    for (let i = 0; i < n; i++) s += pick(TEXT.filter((t) => t !== delimiter && t !== ','));
    return s;
  };
  const content = (): string => {
    if (plain) return text(10);
    let s = '';
    const parts = Math.floor(rnd() * 4);
    for (let i = 0; i < parts; i++) s += pick(['""', delimiter, ...BREAKS, text(6), text(6), text(6)]);
    return s;
  };
  const lineEnd = pick([['\n'], ['\r\n'], BREAKS]);
  let out = '';
  const lines = Math.floor(rnd() * 40);
  for (let l = 0; l < lines; l++) {
    if (rnd() < 0.05) {
      out += pick(lineEnd);
      continue;
    }
    const n = rnd() < 0.8 ? 4 : 1 + Math.floor(rnd() * 6);
    const fields: string[] = [];
    for (let f = 0; f < n; f++) fields.push(`"${content()}"`);
    out += fields.join(delimiter);
    if (l < lines - 1 || rnd() < 0.6) out += pick(lineEnd);
  }
  return out;
}

type TableOutcome =
  | { ok: true; rows: InputRow[]; problems: SourceProblemCounts; width: number }
  | { ok: false; line: number | undefined; problem: string };

/** What the oracle's error code says to the user, as the tokenizer's errors say it. */
const ORACLE_PROBLEMS: Record<string, string> = {
  CSV_QUOTE_NOT_CLOSED: 'a quoted value opens on this line and is never closed',
  CSV_MAX_RECORD_SIZE: 'the record starting on this line is longer than 16 MB',
};

/** What csv-parse makes of `bytes`, every record a row fitted to the first record's width. */
function readOracle(bytes: Buffer, delimiter: string, encoding: 'utf8' | 'latin1'): TableOutcome {
  const got = oracleRecords(bytes, delimiter, encoding);
  if (!got.ok) return { ok: false, line: got.line, problem: ORACLE_PROBLEMS[got.code] ?? got.code };
  const width = got.records[0]?.cells.length ?? 0;
  const problems: SourceProblemCounts = { shortRows: 0, longRows: 0, extraKeys: 0 };
  const rows = got.records.map((r) => fitRow(r.line, r.cells, width, problems));
  return { ok: true, rows, problems, width };
}

function failed(err: unknown): TableOutcome {
  if (!(err instanceof InputError)) throw err;
  // the overlong messages differ by whether a quote is open; they start the same
  const problem = err.problem.startsWith(ORACLE_PROBLEMS.CSV_MAX_RECORD_SIZE)
    ? ORACLE_PROBLEMS.CSV_MAX_RECORD_SIZE
    : err.problem;
  return { ok: false, line: err.line, problem };
}

/** What the table read on this thread (the cutter and the tokenizer over the whole input) makes of `bytes`. */
async function readWhole(
  bytes: Buffer,
  delimiter: string,
  encoding: 'utf8' | 'latin1',
  reads: Buffer[] = [bytes],
  skipping = false,
): Promise<TableOutcome> {
  try {
    const table = await openSource(
      await settled({
        path: 'in.csv',
        format: 'csv',
        header: false,
        delimiter,
        encoding,
        stream: Readable.from(reads),
        ...(skipping ? { onBadRecord: () => expect.unreachable('a record of a readable file skipped') } : {}),
      }),
    );
    const rows: InputRow[] = [];
    for await (const chunk of table.rows()) rows.push(...chunk);
    const { badRows: _, ...problems } = table.problems();
    return { ok: true, rows, problems, width: table.header.length };
  } catch (err) {
    return failed(err);
  }
}

function parsePieces(pieces: CsvPiece[], delimiter: string, encoding: 'utf8' | 'latin1', width: number): TableOutcome {
  const problems: SourceProblemCounts = { shortRows: 0, longRows: 0, extraKeys: 0 };
  try {
    const rows = pieces.flatMap((p) => parseCsvPiece(p, { delimiter, encoding }, width, 'in.csv', problems));
    return { ok: true, rows, problems, width };
  } catch (err) {
    return failed(err);
  }
}

/** The tokenizer on the whole input and on cut pieces, and the table read on this thread, against csv-parse. */
async function checkParse(
  bytes: Buffer,
  delimiter: string,
  encoding: 'utf8' | 'latin1',
  target: number,
  where: string,
): Promise<'split' | 'failed'> {
  const oracle = readOracle(bytes, delimiter, encoding);
  expect(await readWhole(bytes, delimiter, encoding), `${where}: read whole`).toEqual(oracle);
  const reads = pushSizes(seeded(bytes.length + target), bytes);
  expect(await readWhole(bytes, delimiter, encoding, reads), `${where}: read in ${reads.length} reads`).toEqual(oracle);
  if (!oracle.ok) {
    expect(parsePieces([{ bytes, startLine: 1, startOffset: 0 }], delimiter, encoding, 1), where).toEqual(oracle);
    return 'failed';
  }
  // --on-bad-row skip reads a readable file as it is
  expect(await readWhole(bytes, delimiter, encoding, reads, true), `${where}: skip mode`).toEqual(oracle);
  const { width } = oracle;
  expect(parsePieces([{ bytes, startLine: 1, startOffset: 0 }], delimiter, encoding, width), where).toEqual(oracle);
  const cutter = new CsvPieceCutter(delimiter, target, encoding);
  cutter.push(bytes);
  const pieces: CsvPiece[] = [];
  for (let piece = cutter.next(); piece !== undefined; piece = cutter.next()) pieces.push(piece);
  const last = cutter.finish();
  if (last !== undefined) pieces.push(last);
  expect(parsePieces(pieces, delimiter, encoding, width), `${where}, pieces of ${target} B`).toEqual(oracle);
  return 'split';
}

function tokens(text: string, delimiter = ','): (number | string[])[] {
  const out: (number | string[])[] = [];
  tokenizeCsv(text, 1, delimiter, 'utf8', (line, cells) => out.push(line, cells));
  return out;
}

describe('the tokenizer against csv-parse', () => {
  for (const [d, delimiter] of [',', ';', '\t', '§'].entries()) {
    test(`delimiter ${JSON.stringify(delimiter)}: random files with quotes anywhere, all quoted, plainly all quoted, no quote`, async () => {
      const outcomes = { split: 0, failed: 0 };
      for (let n = 0; n < 600; n++) {
        const seed = 5000 * (d + 1) + n;
        const rnd = seeded(seed);
        const kind = n % 4;
        const text =
          kind === 0
            ? generateCsv(rnd, delimiter, true)
            : kind === 3
              ? generateCsv(rnd, delimiter, false)
              : allQuotedCsv(rnd, delimiter, kind === 2);
        const target = 1 + Math.floor(rnd() * 120);
        outcomes[
          await checkParse(Buffer.from(text, 'utf8'), delimiter, 'utf8', target, `seed ${seed}, kind ${kind}`)
        ]++;
      }
      // both outcomes happen, or the comparison proves little
      expect(outcomes.split).toBeGreaterThan(480);
      expect(outcomes.failed).toBeGreaterThan(10);
    });
  }

  test('latin1 input, and a delimiter Latin-1 cannot hold (csv-parse matches its truncated byte)', async () => {
    for (let n = 0; n < 200; n++) {
      const rnd = seeded(9000 + n);
      // characters beyond Latin-1 (the emoji) would not survive as themselves
      const text = (n % 2 === 0 ? generateCsv(rnd, ';', true) : allQuotedCsv(rnd, ';', false)).replace(
        // biome-ignore lint/suspicious/noControlCharactersInRegex: the range starts at U+0000 on purpose: all of Latin-1
        /[^\u0000-\u00ff]/gu,
        'ÿ',
      );
      await checkParse(
        Buffer.from(text, 'latin1'),
        ';',
        'latin1',
        1 + Math.floor(rnd() * 80),
        `latin1 seed ${9000 + n}`,
      );
    }
    // '€' is 0xAC once truncated to Latin-1: csv-parse splits at the byte 0xAC (a '¬' in the text)
    const bytes = Buffer.from('a\xacb,"c\xacd"\n"e\xac"f\xacg\n', 'latin1');
    const whole = await readWhole(bytes, '€', 'latin1');
    expect(whole.ok && whole.rows.map((r) => r.cells)).toEqual([
      ['a', 'b,"c', 'd"'],
      ['"e\xac"f', 'g', ''],
    ]);
    expect(whole).toEqual(readOracle(bytes, '€', 'latin1'));
    expect(parsePieces([{ bytes, startLine: 1, startOffset: 0 }], '€', 'latin1', 3)).toEqual(whole);
  });

  test('a record over 16 MB (a quote never closed, a quoted value, a line) fails on the line csv-parse gives', async () => {
    const big = 'x'.repeat(16 * 1024 * 1024 + 10);
    for (const [text, quoting] of [
      [`a,b\n\n1,"${big}\n2,z\n`, true],
      [`a,b\n1,"${big}"\n2,z\n`, true],
      [`a,b\r\n1,${big}\r\n2,z\r\n`, false],
      [`a;b\n1;2\n"é${big}`, true],
    ] as const) {
      const bytes = Buffer.from(text);
      const delimiter = text.startsWith('a;') ? ';' : ',';
      const oracle = readOracle(bytes, delimiter, 'utf8');
      expect(oracle.ok).toBe(false);
      expect(await readWhole(bytes, delimiter, 'utf8')).toEqual(oracle);
      expect(parsePieces([{ bytes, startLine: 1, startOffset: 0 }], delimiter, 'utf8', 2)).toEqual(oracle);
      let error: unknown;
      try {
        tokenizeCsv(text, 1, delimiter, 'utf8', () => undefined);
      } catch (err) {
        error = err;
      }
      expect(error).toBeInstanceOf(CsvSyntaxError);
      expect((error as CsvSyntaxError).quoting).toBe(quoting);
    }
  }, 120_000); // four 16 MB records through three readers and the oracle: heavy, whatever else the machine runs

  test.each<[string, string, (string[] | number)[]]>([
    ['whole-field quotes', '"a","b","c"\r\n"d","e","f"\n', [1, ['a', 'b', 'c'], 2, ['d', 'e', 'f']]],
    ['doubled quotes', '"say ""hi""","""",""""""\n', [1, ['say "hi"', '"', '""']]],
    [
      'the delimiter and line breaks inside quotes',
      '"a,b","c\r\nd\re\nf",g\nh,"i"\n',
      [1, ['a,b', 'c\r\nd\re\nf', 'g'], 5, ['h', 'i']],
    ],
    ['a quote inside an unquoted value stays', 'O"Brien,a"b"c,"x"\n', [1, ['O"Brien', 'a"b"c', 'x']]],
    ['text after a closing quote keeps the quotes', '"ab"cd,"a""b"x"y,"c"\n', [1, ['"ab"cd', '"a"b"x"y', 'c']]],
    ['"" alone is a row of one empty cell; empty lines are skipped', '\r\n""\n\r\r\n"",\n', [2, [''], 5, ['', '']]],
    ['no final line break, the last value quoted', 'a,b,"c\nd"', [1, ['a', 'b', 'c\nd']]],
    ['a trailing delimiter', '"a","b","c",\n', [1, ['a', 'b', 'c', '']]],
  ])('%s', (_name, text, expected) => {
    expect(tokens(text)).toEqual(expected);
    const oracle = oracleRecords(Buffer.from(text), ',');
    expect(oracle.ok && oracle.records.flatMap((r) => [r.line, r.cells])).toEqual(expected);
  });

  test('a quote never closed is an error on the line it opens, after the records before it', () => {
    const seen: number[] = [];
    expect(() => tokenizeCsv('a,"b\nc\n', 1, ',', 'utf8', () => undefined)).toThrow(CsvSyntaxError);
    expect(() => tokenizeCsv('x\n\n"a""', 3, ',', 'utf8', (line) => seen.push(line))).toThrow(
      expect.objectContaining({ kind: 'unclosed', line: 5 }),
    );
    expect(seen).toEqual([3]);
    expect(() =>
      parseCsvPiece(
        { bytes: Buffer.from('x\n\n"a\nb'), startLine: 7 },
        { delimiter: ',', encoding: 'utf8' },
        1,
        'in.csv',
        { shortRows: 0, longRows: 0, extraKeys: 0 },
      ),
    ).toThrow(/^in\.csv: line 9: a quoted value opens on this line and is never closed/);
  });
});

describe('quote-free text', () => {
  // map/result-csv.ts copies such lines as they are, split the same way
  test('has its lines as records, split at \\r\\n, \\n or \\r, empty lines skipped', () => {
    let lines = 0;
    for (let n = 0; n < 400; n++) {
      const rnd = seeded(12000 + n);
      const text = generateCsv(rnd, ',', false);
      const expected = text.split(/\r\n|\n|\r/).filter((l) => l.length > 0);
      const records: string[] = [];
      tokenizeCsv(text, 1, ',', 'utf8', (_line, cells) => records.push(cells.join(',')));
      expect(records, `seed ${12000 + n}`).toEqual(expected);
      lines += expected.length;
    }
    expect(lines).toBeGreaterThan(2000);
    const records: string[] = [];
    tokenizeCsv('\r\n\ra\r\r\nb\n\nc', 1, ',', 'utf8', (_line, cells) => records.push(cells.join(',')));
    expect(records).toEqual(['a', 'b', 'c']);
  });
});
