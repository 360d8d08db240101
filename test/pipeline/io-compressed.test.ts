import { readFileSync } from 'node:fs';
import { PassThrough } from 'node:stream';
import { gunzipSync, gzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { openSink } from '../../src/pipeline/io/output/sink.js';
import { openSource } from '../../src/pipeline/io/source.js';
import { openCsvPieces } from '../../src/pipeline/io/csv/piece-source.js';
import { parseCsvPiece } from '../../src/pipeline/io/csv/csv-records.js';
import { InputError, type TableSource } from '../../src/pipeline/io/table.js';
import { tempDir } from '../helpers/map-e2e-data.js';
import { settled } from '../helpers/settled-reading.js';

const dir = tempDir('gzip');
afterAll(() => dir.remove());

/** A table with the cells that must survive as text, a quoted line break, and enough rows for many reads. */
function csvText(rows: number): string {
  const lines = ['id,email,phone,zip,note'];
  for (let i = 0; i < rows; i++)
    lines.push(
      `${String(i).padStart(3, '0')},user${i}@example.com,+1617555${String(i % 10000).padStart(4, '0')},02134,"a, ""b""${i % 100 === 0 ? '\nsecond line' : ''}"`,
    );
  return `${lines.join('\n')}\n`;
}

async function readAll(
  source: TableSource,
): Promise<{ header: string[]; rows: Array<{ line: number; cells: string[] }> }> {
  const rows: Array<{ line: number; cells: string[] }> = [];
  for await (const chunk of source.rows()) for (const r of chunk) rows.push({ line: r.line, cells: r.cells });
  return { header: source.header, rows };
}

/** Opens and reads to the end: a problem may show while opening (in the header) or later. */
async function readThrough(path: string): Promise<unknown> {
  return readAll(await openSource(await settled({ path })));
}

async function failure(promise: Promise<unknown>): Promise<InputError> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(InputError);
    return err as InputError;
  }
  throw new Error('expected an InputError');
}

describe('gzip input', () => {
  const text = csvText(5000);
  const plain = dir.file('t.csv', text);

  it('a .csv.gz reads as the same rows, with the same lines, as the plain file', async () => {
    const gz = dir.file('t.csv.gz', gzipSync(text));
    const want = await readAll(await openSource(await settled({ path: plain, chunkRows: 333 })));
    const got = await readAll(await openSource(await settled({ path: gz, chunkRows: 333 })));
    expect(got).toEqual(want);
    expect(got.rows[0].cells).toEqual(['000', 'user0@example.com', '+16175550000', '02134', 'a, "b"\nsecond line']);
    expect(got.rows.length).toBe(5000);
  });

  it('is recognised by its first bytes whatever the name, also on a stream (stdin)', async () => {
    const want = await readAll(await openSource(await settled({ path: plain })));
    const misnamed = dir.file('export.csv', gzipSync(text));
    expect(await readAll(await openSource(await settled({ path: misnamed })))).toEqual(want);
    const stream = new PassThrough();
    const bytes = gzipSync(text);
    // a pipe delivers small pieces: the gzip signature may arrive split
    for (let i = 0; i < bytes.length; i += 7) stream.write(bytes.subarray(i, i + 7));
    stream.end();
    expect(await readAll(await openSource(await settled({ path: '-', stream })))).toEqual(want);
  });

  it('reads concatenated gzip members (parts appended into one file) on', async () => {
    const half = text.indexOf('\n2500,');
    const gz = dir.file(
      'members.csv.gz',
      Buffer.concat([gzipSync(text.slice(0, half + 1)), gzipSync(text.slice(half + 1))]),
    );
    expect(await readAll(await openSource(await settled({ path: gz })))).toEqual(
      await readAll(await openSource(await settled({ path: plain }))),
    );
  });

  it('gives the row threads the same pieces of text', async () => {
    const gz = dir.file('pieces.csv.gz', gzipSync(text));
    const source = await openCsvPieces(await settled({ path: gz }), 4096);
    expect(source.header).toEqual(['id', 'email', 'phone', 'zip', 'note']);
    const counts = { shortRows: 0, longRows: 0, extraKeys: 0 };
    const rows: Array<{ line: number; cells: string[] }> = [];
    for await (const piece of source.pieces())
      for (const r of parseCsvPiece(piece, source.settings, source.width, source.name, counts))
        rows.push({ line: r.line, cells: r.cells });
    expect(rows).toEqual((await readAll(await openSource(await settled({ path: plain })))).rows);
    expect(source.bytesRead()).toBe(readFileSync(gz).length);
  });

  it('a .jsonl.gz is JSON Lines', async () => {
    const gz = dir.file(
      't.jsonl.gz',
      gzipSync('{"email":"a@example.com","zip":"02134"}\n{"email":"b@example.com","zip":"007"}\n'),
    );
    const got = await readAll(await openSource(await settled({ path: gz })));
    expect(got.header).toEqual(['email', 'zip']);
    expect(got.rows.map((r) => r.cells)).toEqual([
      ['a@example.com', '02134'],
      ['b@example.com', '007'],
    ]);
  });

  describe('bad input: one InputError naming the file, no cell value in it', () => {
    it('a truncated gzip', async () => {
      const bytes = gzipSync(text);
      const path = dir.file('truncated.csv.gz', bytes.subarray(0, Math.floor(bytes.length / 2)));
      const err = await failure(readThrough(path));
      expect(err.message).toBe(
        `${path}: the gzip data ends early (a truncated file?); copy or download it again, completely`,
      );
    });

    it('a gzip of a binary file', async () => {
      const binary = Buffer.alloc(4096);
      for (let i = 0; i < binary.length; i++) binary[i] = (i * 7919) & 0xff;
      const path = dir.file('binary.csv.gz', gzipSync(binary));
      const err = await failure(readThrough(path));
      expect(err.message).toMatch(
        /NUL byte in the decompressed data \(a gzip of a binary file, not of text\?\)|invalid UTF-8/,
      );
      expect(err.file).toBe(path);
    });

    it('corrupt gzip data', async () => {
      const bytes = Buffer.from(gzipSync(text));
      for (let i = 40; i < 80; i++) bytes[i] ^= 0x5a;
      const path = dir.file('corrupt.csv.gz', bytes);
      const err = await failure(readThrough(path));
      expect(err.message).toMatch(
        new RegExp(`^${path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: corrupt gzip data \\(Z_DATA_ERROR\\)`),
      );
    });

    it('a file named .gz that is not gzip', async () => {
      const path = dir.file('plain.csv.gz', text);
      const err = await failure(openSource(await settled({ path })));
      expect(err.message).toBe(
        `${path}: named .gz but not gzip-compressed; rename it without .gz, or check how it was exported`,
      );
    });

    it('a gzip of a gzip', async () => {
      const path = dir.file('twice.csv.gz', gzipSync(gzipSync(text)));
      const err = await failure(openSource(await settled({ path })));
      expect(err.message).toContain('gzip-compressed twice');
    });

    it('a Parquet file read as text', async () => {
      const path = dir.file('data.csv', Buffer.concat([Buffer.from('PAR1'), Buffer.alloc(64, 1)]));
      const err = await failure(openSource(await settled({ path })));
      expect(err.message).toBe(`${path}: a Parquet file, read as text; name it .parquet or add --input-format parquet`);
    });
  });
});

describe('gzip output', () => {
  const header = ['id', 'email', 'zip'];
  const rows = Array.from({ length: 3000 }, (_, i) => [
    String(i).padStart(4, '0'),
    `u${i}@example.com`,
    i % 2 ? '02134' : 'a,"b"',
  ]);

  async function written(path: string, format: 'csv' | 'jsonl', compress?: 'gzip' | 'none'): Promise<Buffer> {
    const sink = await openSink({ path, format, header, ...(compress ? { compress } : {}) });
    for (let i = 0; i < rows.length; i += 700) await sink.writeRows(rows.slice(i, i + 700).map((r) => r.slice()));
    await sink.commit();
    return readFileSync(path);
  }

  it('-o x.csv.gz writes the same bytes as x.csv, gzipped, and reads back as the same rows', async () => {
    const plain = await written(dir.file('out.csv'), 'csv');
    const gzPath = dir.file('out.csv.gz');
    const gz = await written(gzPath, 'csv');
    expect(gz[0]).toBe(0x1f);
    expect(gz[1]).toBe(0x8b);
    expect(gunzipSync(gz).equals(plain)).toBe(true);
    const back = await readAll(await openSource(await settled({ path: gzPath })));
    expect(back.header).toEqual(header);
    expect(back.rows.map((r) => r.cells)).toEqual(rows);
  });

  it('compress says otherwise than the name: gzip to any name, none to .gz', async () => {
    const jsonl = await written(dir.file('out.jsonl'), 'jsonl');
    expect(gunzipSync(await written(dir.file('out-gz.jsonl'), 'jsonl', 'gzip')).equals(jsonl)).toBe(true);
    expect((await written(dir.file('plain.jsonl.gz'), 'jsonl', 'none')).equals(jsonl)).toBe(true);
  });

  it('to a stream (stdout)', async () => {
    const stream = new PassThrough();
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    const sink = await openSink({ path: '-', format: 'csv', header, compress: 'gzip', stream });
    await sink.writeRows(rows.map((r) => r.slice()));
    await sink.commit();
    const text = gunzipSync(Buffer.concat(chunks)).toString('utf8');
    expect(text.split('\n')[0]).toBe('id,email,zip');
    expect(text.split('\n').length).toBe(rows.length + 2);
  });

  it('an aborted run leaves no file that looks complete', async () => {
    const path = dir.file('aborted.csv.gz');
    const sink = await openSink({ path, format: 'csv', header });
    await sink.writeRows(rows.map((r) => r.slice()));
    await sink.abort();
    expect(() => readFileSync(path)).toThrow();
  });
});
