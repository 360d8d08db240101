import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, describe, expect, test } from 'vitest';
import { parseCsvRecords } from '../../src/pipeline/io/csv/csv-records.js';
import { parseDelimiter } from '../../src/pipeline/io/csv/delimiter.js';
import { uniqueHeader } from '../../src/pipeline/io/csv/unique-header.js';
import { MAX_RECORD_BYTES } from '../../src/pipeline/io/record-limit.js';
import { openSource } from '../../src/pipeline/io/source.js';
import { openCsvPieces } from '../../src/pipeline/io/csv/piece-source.js';
import { InputError, type InputRow, type OpenSourceOptions, type TableSource } from '../../src/pipeline/io/table.js';
import { settled } from '../helpers/settled-reading.js';

const dir = mkdtempSync(join(tmpdir(), 'uid2-io-source-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let fileNo = 0;
function file(content: string | Buffer, ext = '.csv'): string {
  const path = join(dir, `f${++fileNo}${ext}`);
  writeFileSync(path, content);
  return path;
}

async function readAll(source: TableSource): Promise<InputRow[]> {
  const rows: InputRow[] = [];
  for await (const chunk of source.rows()) rows.push(...chunk);
  return rows;
}

async function read(content: string | Buffer, opts: Partial<OpenSourceOptions> = {}, ext = '.csv') {
  const source = await openSource(await settled({ path: file(content, ext), ...opts }));
  const rows = await readAll(source);
  return { source, rows };
}

async function inputError(
  content: string | Buffer,
  opts: Partial<OpenSourceOptions> = {},
  ext = '.csv',
): Promise<InputError> {
  try {
    await read(content, opts, ext);
  } catch (err) {
    if (err instanceof InputError) return err;
    throw err;
  }
  throw new Error('expected an InputError');
}

/** A stream that makes `total` bytes of CSV on demand, counting what has been pulled from it. */
function countingCsv(rows: number): { stream: Readable; pulled: () => number } {
  let next = 0;
  let pulled = 0;
  const stream = new Readable({
    highWaterMark: 16 * 1024,
    read() {
      if (next === 0) {
        this.push('id,email\n');
      }
      if (next >= rows) {
        this.push(null);
        return;
      }
      let text = '';
      for (let i = 0; i < 500 && next < rows; i++, next++) text += `${next},user${next}@example.com\n`;
      pulled += text.length;
      this.push(text);
    },
  });
  return { stream, pulled: () => pulled };
}

describe('CSV source', () => {
  test('every cell stays a string exactly as written: no trimming, no number casting', async () => {
    const { source, rows } = await read(
      'id,phone,zip,hash\n007,+14155550100, 02134 ,DH5qQFhi5ALrdqcPiib8cy0Hwykx6frpqxWCkR0uijs=\n',
    );
    expect(source.header).toEqual(['id', 'phone', 'zip', 'hash']);
    expect(rows).toEqual([
      { line: 2, cells: ['007', '+14155550100', ' 02134 ', 'DH5qQFhi5ALrdqcPiib8cy0Hwykx6frpqxWCkR0uijs='] },
    ]);
  });

  test('rows come in input order, in chunks of at most chunkRows, with their physical line numbers', async () => {
    const lines = ['id,email'];
    for (let i = 0; i < 2500; i++)
      lines.push(i % 100 === 7 ? `${i},"two\nlines${i}@example.com"` : `${i},u${i}@example.com`);
    const source = await openSource(await settled({ path: file(`${lines.join('\n')}\n`), chunkRows: 1000 }));
    const sizes: number[] = [];
    const rows: InputRow[] = [];
    for await (const chunk of source.rows()) {
      sizes.push(chunk.length);
      rows.push(...chunk);
    }
    expect(sizes.every((n) => n <= 1000)).toBe(true);
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(2500);
    expect(rows.map((r) => r.cells[0])).toEqual(Array.from({ length: 2500 }, (_, i) => String(i)));
    // every multi-line record pushes later records one line down
    let expectedLine = 2;
    for (const row of rows) {
      expect(row.line).toBe(expectedLine);
      expectedLine += row.cells[1].includes('\n') ? 2 : 1;
    }
  });

  test('line numbers stay exact after a quoted CRLF cell (one line per CRLF)', async () => {
    const { rows } = await read('id,note\r\n1,"a\r\nb\r\nc"\r\n2,x\r\n\r\n3,y\r\n');
    expect(rows.map((r) => r.line)).toEqual([2, 5, 7]);
    expect(rows[0].cells[1]).toBe('a\r\nb\r\nc');
  });

  test('line ends mixed within one file: no \\r left in a cell, no two rows merged, line numbers exact', async () => {
    const want = [
      ['1', 'a@example.com'],
      ['2', 'b@example.com'],
      ['3', 'c@example.com'],
    ];
    for (const text of [
      'id,email\n1,a@example.com\r\n2,b@example.com\n3,c@example.com\r\n',
      'id,email\r\n1,a@example.com\n2,b@example.com\r\n3,c@example.com\n',
      'id,email\r1,a@example.com\n2,b@example.com\r\n3,c@example.com',
    ]) {
      const { rows } = await read(text);
      expect(rows.map((r) => r.cells)).toEqual(want);
      expect(rows.map((r) => r.line)).toEqual([2, 3, 4]);
      expect(rows.every((r) => r.problem === undefined)).toBe(true);
      // one byte per read: a CR ending one read and its LF starting the next are still one line end
      const bytes = Buffer.from(text);
      const stream = Readable.from(
        (function* () {
          for (const b of bytes) yield Buffer.of(b);
        })(),
      );
      const source = await openSource(await settled({ path: '-', stream }));
      const split = await readAll(source);
      expect(split.map((r) => [r.line, ...r.cells])).toEqual(want.map((cells, i) => [i + 2, ...cells]));
    }
  });

  test('BOM, CRLF and CR-only line ends read the same', async () => {
    const want = [
      ['1', 'a@example.com'],
      ['2', 'b@example.com'],
    ];
    for (const text of [
      '\ufeffid,email\n1,a@example.com\n2,b@example.com\n',
      'id,email\r\n1,a@example.com\r\n2,b@example.com\r\n',
      'id,email\r1,a@example.com\r2,b@example.com',
    ]) {
      const { source, rows } = await read(text);
      expect(source.header).toEqual(['id', 'email']);
      expect(rows.map((r) => r.cells)).toEqual(want);
      expect(rows.map((r) => r.line)).toEqual([2, 3]);
    }
  });

  test('--delimiter: one character, tab by name when checked; the wrong one leaves a single column', async () => {
    expect((await read('id;email\n1;a@example.com\n', { delimiter: ';' })).rows[0].cells).toEqual([
      '1',
      'a@example.com',
    ]);
    expect(
      (await read('id\temail\n1\ta@example.com\n', { delimiter: parseDelimiter('tab', 'x') })).rows[0].cells,
    ).toEqual(['1', 'a@example.com']);
    expect((await read('id|email\n1|a@example.com\n', { delimiter: '|' })).source.header).toEqual(['id', 'email']);
    expect((await read('id;email\n1;a@example.com\n')).source.header).toEqual(['id;email']);
    expect(parseDelimiter('\\t', 'x')).toBe('\t');
    expect(() => parseDelimiter(';;', 'x')).toThrow(/one character/);
    expect(() => parseDelimiter('"', 'x')).toThrow(InputError);
  });

  test('header: false names the columns col1..colN and keeps the first line as data', async () => {
    const { source, rows } = await read('a@example.com,1\nb@example.com,2\n', { header: false });
    expect(source.header).toEqual(['col1', 'col2']);
    expect(rows.map((r) => [r.line, r.cells[0]])).toEqual([
      [1, 'a@example.com'],
      [2, 'b@example.com'],
    ]);
  });

  test('duplicate and empty header names are made unique, with a note each', () => {
    const { header, notes } = uniqueHeader(['email', 'email', '', 'email_2', 'email']);
    expect(header).toEqual(['email', 'email_3', 'col3', 'email_2', 'email_4']);
    expect(new Set(header).size).toBe(header.length);
    expect(notes).toHaveLength(3);
  });

  test('ragged rows: short ones padded, long ones cut to the header and flagged, trailing empty cells ignored', async () => {
    const { rows, source } = await read('a,b,c\n1,2\n1,2,3,4\n1,2,3,,\n1,2,3\n');
    expect(rows.map((r) => r.cells)).toEqual([
      ['1', '2', ''],
      ['1', '2', '3'],
      ['1', '2', '3'],
      ['1', '2', '3'],
    ]);
    expect(rows.map((r) => r.problem)).toEqual([
      { kind: 'short_row', cells: 2, expected: 3 },
      { kind: 'long_row', cells: 4, expected: 3 },
      undefined,
      undefined,
    ]);
    expect(source.problems()).toEqual({ shortRows: 1, longRows: 1, extraKeys: 0 });
  });

  test('a quote inside an unquoted value is text (O"Brien), as spreadsheets read it', async () => {
    const { rows } = await read('id,name\n1,O"Brien\n2,"say ""hi"""\n');
    expect(rows.map((r) => r.cells[1])).toEqual(['O"Brien', 'say "hi"']);
  });

  test('an unclosed quote names the line where the record starts, not the end of the file, and no cell', async () => {
    const err = await inputError('id,email\n1,a@example.com\n2,"b@example.com\n3,c@example.com\n4,d@example.com\n');
    expect(err.line).toBe(3);
    expect(err.message).toMatch(/: line 3: a quoted value opens on this line and is never closed/);
    expect(err.message).not.toMatch(/@example\.com/);
  });

  test('invalid UTF-8 is an error naming its line; --encoding latin1 reads the same bytes', async () => {
    const bytes = Buffer.concat([
      Buffer.from('id,name,email\n1,Ann,a@example.com\n2,Ren'),
      Buffer.from([0xe9]),
      Buffer.from(',r@example.com\n'),
    ]);
    const err = await inputError(bytes);
    expect(err.line).toBe(3);
    expect(err.message).toContain('--encoding latin1');
    const { rows } = await read(bytes, { encoding: 'latin1' });
    expect(rows[1].cells).toEqual(['2', 'René', 'r@example.com']);
  });

  test('a UTF-8 character split across two reads is not mistaken for invalid bytes', async () => {
    const text = `id,name\n${Array.from({ length: 3000 }, (_, i) => `${i},Zoë😊${i}`).join('\n')}\n`;
    const bytes = Buffer.from(text);
    // a stream that cuts every 7 bytes, so some cuts fall inside multi-byte characters
    const pieces: Buffer[] = [];
    for (let i = 0; i < bytes.length; i += 7) pieces.push(bytes.subarray(i, i + 7));
    const source = await openSource(await settled({ path: '-', stream: Readable.from(pieces) }));
    const rows = await readAll(source);
    expect(rows).toHaveLength(3000);
    expect(rows[2999].cells[1]).toBe('Zoë😊2999');
  });

  test('invalid UTF-8 far into a big file gets the right line number', async () => {
    const lines = ['id,email'];
    for (let i = 0; i < 20_000; i++) lines.push(`${i},user${i}@example.com`);
    const good = Buffer.from(`${lines.join('\n')}\n`);
    const err = await inputError(Buffer.concat([good, Buffer.from([0x31, 0x2c, 0xff, 0x0a])]));
    expect(err.line).toBe(20_002);
  });

  test('a NUL byte is an error naming its line', async () => {
    const err = await inputError(Buffer.from('id,email\n1,a@example.com\n2,b\u0000@example.com\n'));
    expect(err.line).toBe(3);
    expect(err.message).toContain('NUL byte');
  });

  test('an empty file has no header and no rows; a header-only file has no rows', async () => {
    const empty = await read('');
    expect(empty.source.header).toEqual([]);
    expect(empty.rows).toEqual([]);
    const blank = await read('\n\n');
    expect(blank.source.header).toEqual([]);
    const headerOnly = await read('id,email\r\n');
    expect(headerOnly.source.header).toEqual(['id', 'email']);
    expect(headerOnly.rows).toEqual([]);
  });

  test('1,000 columns', async () => {
    const header = Array.from({ length: 1000 }, (_, i) => `c${i}`);
    const row = Array.from({ length: 1000 }, (_, i) => `v${i}`);
    const { source, rows } = await read(`${header.join(',')}\n${row.join(',')}\n`);
    expect(source.header).toEqual(header);
    expect(rows[0].cells).toEqual(row);
  });

  test('a 10 MB single line is read; a record over the limit is one clear error, not a crash', async () => {
    const long = 'x'.repeat(10 * 1024 * 1024);
    const { rows } = await read(`id,email\n1,${long}@example.com\n2,b@example.com\n`);
    expect(rows.map((r) => r.line)).toEqual([2, 3]);
    expect(rows[0].cells[1]).toHaveLength(long.length + 12);

    const tooLong = 'y'.repeat(MAX_RECORD_BYTES + 1024);
    const err = await inputError(`id,email\n1,a@example.com\n2,${tooLong}\n`);
    expect(err.line).toBe(3);
    expect(err.message).toMatch(/longer than 16 MB/);
    expect(err.message.length).toBeLessThan(300);
  });

  test('a line over the limit with no quote in it is too long, not blamed on a quote (the table and the pieces)', async () => {
    const content = `id,email\n1,a@example.com\n2,${'y'.repeat(MAX_RECORD_BYTES + 1024)}\n3,b@example.com\n`;
    const err = await inputError(content);
    expect(err.line).toBe(3);
    expect(err.message).toMatch(/: line 3: .*longer than 16 MB/);
    expect(err.message).not.toMatch(/never closed/);
    // the row threads: pieces cut on this thread, each parsed as a row thread parses it
    const pieces = await openCsvPieces(await settled({ path: file(content) }));
    const threadErr = await (async () => {
      try {
        for await (const piece of pieces.pieces()) parseCsvRecords(piece, pieces.settings, pieces.name);
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(threadErr).toBeInstanceOf(InputError);
    expect([(threadErr as InputError).line, (threadErr as InputError).problem]).toEqual([err.line, err.problem]);
  });

  test('an unclosed quote in a big file stops at the record limit with the line where it opened', async () => {
    const rest = Array.from({ length: 700_000 }, (_, i) => `${i},user${i}@example.com`).join('\n');
    const err = await inputError(`id,email\n1,"oops\n${rest}\n`);
    expect(err.line).toBe(2);
    expect(err.message).toMatch(/longer than 16 MB/);
    expect(err.message).toMatch(/quote is probably never closed/);
  });

  test('reads ahead at most a little beyond the chunk being built (backpressure)', async () => {
    const { stream, pulled } = countingCsv(200_000);
    const source = await openSource(await settled({ path: '-', stream, chunkRows: 1000 }));
    const iterator = source.rows()[Symbol.asyncIterator]();
    const first = await iterator.next();
    expect(first.done).toBe(false);
    // 200,000 rows are ~6 MB; a chunk of 1,000 rows needs ~30 KB, plus a read or two in flight
    expect(pulled()).toBeLessThan(200_000);
    await iterator.return?.();
  });

  test('stdin: no total size, bytes read counted, name <stdin>', async () => {
    const { stream } = countingCsv(3000);
    const source = await openSource(await settled({ path: '-', stream }));
    expect(source.name).toBe('<stdin>');
    expect(source.totalBytes).toBeUndefined();
    const rows = await readAll(source);
    expect(rows).toHaveLength(3000);
    expect(source.bytesRead()).toBeGreaterThan(3000 * 20);
  });

  test('a file: total size known, bytes read reach it', async () => {
    const text = `id,email\n${Array.from({ length: 5000 }, (_, i) => `${i},u${i}@example.com`).join('\n')}\n`;
    const source = await openSource(await settled({ path: file(text) }));
    expect(source.totalBytes).toBe(Buffer.byteLength(text));
    await readAll(source);
    expect(source.bytesRead()).toBe(Buffer.byteLength(text));
  });

  test('rows() can be iterated only once', async () => {
    const source = await openSource(await settled({ path: file('a\n1\n') }));
    await readAll(source);
    expect(() => source.rows()).toThrow(/only once/);
  });

  test('a missing file, a directory: one line naming the path', async () => {
    await expect(openSource(await settled({ path: join(dir, 'nope.csv') }))).rejects.toThrow(/nope\.csv: no such file/);
    await expect(openSource(await settled({ path: dir }))).rejects.toThrow(/a directory, not a file/);
  });
});

describe('JSONL source', () => {
  test('format from the extension; values become their text; header = keys of the first chunk', async () => {
    const { source, rows } = await read(
      '{"email":"a@example.com","n":12,"ok":false}\n{"email":"b@example.com","phone":"+14155550100","n":null}\n',
      {},
      '.ndjson',
    );
    expect(source.header).toEqual(['email', 'n', 'ok', 'phone']);
    expect(rows).toEqual([
      { line: 1, cells: ['a@example.com', '12', 'false', ''] },
      { line: 2, cells: ['b@example.com', '', '', '+14155550100'] },
    ]);
  });

  test('a key first seen after the first chunk is reported on its row, not silently added', async () => {
    const { source, rows } = await read(
      '{"email":"a@example.com"}\n{"email":"b@example.com"}\n{"email":"c@example.com","late":"x"}\n',
      { chunkRows: 2 },
      '.jsonl',
    );
    expect(source.header).toEqual(['email']);
    expect(rows[2]).toEqual({ line: 3, cells: ['c@example.com'], problem: { kind: 'extra_keys', keys: 1 } });
    expect(source.problems().extraKeys).toBe(1);
  });

  test('--format jsonl overrides the extension; BOM, CRLF and blank lines are fine', async () => {
    const { rows } = await read('\ufeff{"email":"a@example.com"}\r\n\r\n{"email":"b@example.com"}', {
      format: 'jsonl',
    });
    expect(rows).toEqual([
      { line: 1, cells: ['a@example.com'] },
      { line: 3, cells: ['b@example.com'] },
    ]);
  });

  test('a bad line is an InputError with its line number and without its content', async () => {
    const err = await inputError('{"email":"a@example.com"}\n{"email":"secret@example.com"\n', {}, '.jsonl');
    expect(err.line).toBe(2);
    expect(err.message).not.toContain('secret');
    const notObject = await inputError('{"email":"a@example.com"}\n\n"b@example.com"\n', {}, '.jsonl');
    expect(notObject.line).toBe(3);
    expect(notObject.message).toContain('not a JSON object');
  });

  test('a value nested 100,000 deep is an InputError naming its line, not a stack overflow', async () => {
    const deep = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
    const content = `{"email":"a@example.com"}\n{"email":"b@example.com","x":${deep}}\n{"email":"c@example.com"}\n`;
    const err = await inputError(content, {}, '.jsonl');
    expect(err.line).toBe(2);
    expect(err.message).toMatch(/nested deeper than 1,000 levels/);
    // the first line, read before the header is known, is checked too; a value as deep as allowed is read
    expect((await inputError(`{"email":"b@example.com","x":${deep}}\n`, {}, '.jsonl')).line).toBe(1);
    const allowed = `${'['.repeat(999)}1${']'.repeat(999)}`;
    const { rows } = await read(`{"email":"a@example.com","x":${allowed}}\n`, {}, '.jsonl');
    expect(rows[0].cells[1]).toBe(allowed);
  });

  test('a bad byte far into a JSONL file gets the right line number', async () => {
    const lines = Array.from({ length: 30_000 }, (_, i) => `{"email":"user${i}@example.com"}`).join('\n');
    const err = await inputError(
      Buffer.concat([Buffer.from(`${lines}\n{"email":"x`), Buffer.from([0xc0]), Buffer.from('"}\n')]),
      {},
      '.jsonl',
    );
    expect(err.line).toBe(30_001);
    expect(err.message).toContain('invalid UTF-8');
  });

  test('a 10 MB JSONL line is read', async () => {
    const long = 'z'.repeat(10 * 1024 * 1024);
    const { rows } = await read(`{"email":"${long}@example.com"}\n{"email":"b@example.com"}\n`, {}, '.jsonl');
    expect(rows.map((r) => r.line)).toEqual([1, 2]);
    expect(rows[0].cells[0].length).toBe(long.length + 12);
  });

  test('an empty JSONL input has no header and no rows', async () => {
    const { source, rows } = await read('', {}, '.jsonl');
    expect(source.header).toEqual([]);
    expect(rows).toEqual([]);
  });
});
