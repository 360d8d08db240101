import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { DuckDBInstance } from '@duckdb/node-api';
import { parquetMetadata } from 'hyparquet';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { blockRowCount, cellsOfBlock, utf8ColumnsRowBlock, utf8RowBlock } from '../../src/pipeline/io/row-blocks.js';
import type { OpenSinkOptions, TableSink } from '../../src/pipeline/io/table.js';
import { openSource } from '../../src/pipeline/io/source.js';
import { ensureBuilt, ROOT } from '../helpers/map-e2e-build.js';
import { tempDir } from '../helpers/map-e2e-data.js';
import { settled } from '../helpers/settled-reading.js';

// Worker threads start from compiled JS, so the threaded Parquet sink is exercised through dist/.
type OpenParquetSink = (opts: OpenSinkOptions, rowGroupRows?: number) => Promise<TableSink>;

const HEADER = ['id', 'email', 'note', 'raw_uid', 'refresh_from', 'opted_out', 'status'];
const TYPES = ['input', 'input', 'input', 'string', 'unix_time', 'boolean', 'string'] as const;

/** Rows with empty cells, non-ASCII text in some chunks only, and missing values of the tool's own columns. */
function rowsFor(n: number): string[][] {
  return Array.from({ length: n }, (_, i) => {
    const mapped = i % 9 !== 4;
    return [
      String(i).padStart(5, '0'),
      i % 17 === 0 ? '' : `user${i}@example.com`,
      i % 1500 < 3 ? `é ${i} 😀, "quoted"` : i % 7 === 0 ? '' : `note ${i % 40}`,
      mapped ? `UID${i}`.padEnd(44, '=') : '',
      mapped ? String(1_801_785_600 + (i % 300) * 86_400) : '',
      i % 3 === 0 ? 'true' : i % 3 === 1 ? 'false' : '',
      mapped ? 'mapped' : 'invalid',
    ];
  });
}

describe('UTF-8 row blocks', () => {
  it('give back the cells they were made of, fitted to the width, ASCII or not', () => {
    const rows = [['a', '', 'c'], ['é 😀', 'x,"y"', '\u0000'], ['short']];
    const block = utf8RowBlock(rows, 3);
    expect(blockRowCount(block)).toBe(3);
    expect(cellsOfBlock(block)).toEqual([
      ['a', '', 'c'],
      ['é 😀', 'x,"y"', '\u0000'],
      ['short', '', ''],
    ]);
    expect(cellsOfBlock(utf8RowBlock([['ab', 'cd']], 2))).toEqual([['ab', 'cd']]);
    expect(cellsOfBlock(utf8RowBlock([], 4))).toEqual([]);
  });
});

describe('UTF-8 row blocks from columns already in bytes', () => {
  it('are the blocks that the same rows make, ASCII or not, with a column of empty cells', () => {
    const rows = [
      ['a', 'é 😀', 'x', 'r1'],
      ['', 'plain', 'y', ''],
      ['ccc', '\u0000', 'z', 'ü'],
    ];
    const asColumn = (c: number) => {
      const cells = rows.map((r) => Buffer.from(r[c], 'utf8'));
      return { bytes: Buffer.concat(cells), lengths: Uint32Array.from(cells, (b) => b.length) };
    };
    const tail = rows.map((r) => r.slice(2));
    const block = utf8ColumnsRowBlock(3, [asColumn(0), asColumn(1)], tail, 2);
    expect(Buffer.from(block).equals(Buffer.from(utf8RowBlock(rows, 4)))).toBe(true);
    const withEmpty = utf8ColumnsRowBlock(3, [null, asColumn(1)], tail, 3);
    expect(cellsOfBlock(withEmpty)).toEqual(rows.map((r) => ['', r[1], r[2], r[3], '']));
    expect(() => utf8ColumnsRowBlock(2, [asColumn(0)], tail.slice(0, 2), 2)).toThrow(/row count/);
  });
});

describe('Parquet output encoded on a worker thread (dist)', () => {
  let openParquetSink: OpenParquetSink;
  const dir = tempDir('uid2-parquet-thread-');

  beforeAll(async () => {
    ensureBuilt();
    const url = pathToFileURL(join(ROOT, 'dist', 'pipeline', 'io', 'parquet', 'parquet-sink.js')).href;
    openParquetSink = ((await import(url)) as { openParquetSink: OpenParquetSink }).openParquetSink;
  });
  afterAll(() => dir.remove());

  async function write(
    threads: number,
    rows: string[][],
    chunk: number,
    name: string,
    rowGroupRows = 1000,
  ): Promise<string> {
    const path = join(dir.path, `${name}-${threads}.parquet`);
    const sink = await openParquetSink(
      { path, format: 'parquet', header: HEADER, types: [...TYPES], threads },
      rowGroupRows,
    );
    for (let i = 0; i < rows.length; i += chunk) await sink.writeRows(rows.slice(i, i + chunk));
    await sink.commit();
    return path;
  }

  it('writes the same bytes as the inline encoder, whatever the chunks, and reads back cell for cell', async () => {
    const rows = rowsFor(4321);
    const inline = readFileSync(await write(0, rows, 250, 'same'));
    for (const chunk of [1, 333, 1000, 5000]) {
      const threaded = await write(1, rows, chunk, `same-${chunk}`);
      expect(Buffer.compare(readFileSync(threaded), inline), `chunks of ${chunk}`).toBe(0);
    }
    const source = await openSource(await settled({ path: join(dir.path, 'same-333-1.parquet') }));
    const back: string[][] = [];
    for await (const c of source.rows()) for (const r of c) back.push(r.cells);
    expect(back).toEqual(rows);
  });

  it('row groups larger than the batches the writer is given: the same bytes whatever the chunks', async () => {
    const rows = rowsFor(21_000);
    const inline = readFileSync(await write(0, rows, 5000, 'big-groups', 18_000));
    const threaded = readFileSync(await write(1, rows, 777, 'big-groups', 18_000));
    expect(Buffer.compare(threaded, inline)).toBe(0);
    const metadata = parquetMetadata(inline.buffer.slice(inline.byteOffset, inline.byteOffset + inline.length));
    expect(metadata.row_groups.map((g) => Number(g.num_rows))).toEqual([18_000, 3000]);
    const back: string[][] = [];
    for await (const c of (await openSource(await settled({ path: join(dir.path, 'big-groups-1.parquet') }))).rows())
      for (const r of c) back.push(r.cells);
    expect(back).toEqual(rows);
  });

  it('rows handed over as UTF-8 blocks (by a thread that kept them) write the same bytes, inline and threaded', async () => {
    const rows = rowsFor(3001);
    // a short row is fitted as addRows fits it: missing cells are empty
    rows[5] = rows[5].slice(0, 3);
    const inline = readFileSync(await write(0, rows, 250, 'rows'));
    for (const threads of [0, 1]) {
      const path = join(dir.path, `blocks-${threads}.parquet`);
      const sink = await openParquetSink({ path, format: 'parquet', header: HEADER, types: [...TYPES], threads }, 1000);
      for (let i = 0; i < rows.length; i += 700) await sink.writeEncoded(utf8RowBlock(rows.slice(i, i + 700), 7));
      await sink.commit();
      expect(Buffer.compare(readFileSync(path), inline), `threads ${threads}`).toBe(0);
    }
  });

  it('what it writes reads back in DuckDB with the column types and nulls of the tool', async () => {
    const rows = rowsFor(2500);
    const path = await write(1, rows, 400, 'duck');
    const db = await DuckDBInstance.create(':memory:');
    const conn = await db.connect();
    try {
      const result = await conn.runAndReadAll(`SELECT * FROM read_parquet('${path}') ORDER BY id`);
      expect(result.columnTypes().map((t) => t.toString())).toEqual([
        'VARCHAR',
        'VARCHAR',
        'VARCHAR',
        'VARCHAR',
        'BIGINT',
        'BOOLEAN',
        'VARCHAR',
      ]);
      const got = result.getRows();
      expect(got).toHaveLength(rows.length);
      const expected = rows.map((r) => [
        r[0],
        r[1],
        r[2],
        r[3] === '' ? null : r[3],
        r[4] === '' ? null : BigInt(r[4]),
        r[5] === '' ? null : r[5] === 'true',
        r[6],
      ]);
      expect(got).toEqual(expected);
    } finally {
      conn.closeSync();
      db.closeSync();
    }
  });

  it('a cell that does not fit its column type fails the run in one line, and leaves no file', async () => {
    const path = join(dir.path, 'bad.parquet');
    const sink = await openParquetSink({ path, format: 'parquet', header: ['n'], types: ['integer'], threads: 1 });
    let failure: unknown;
    try {
      await sink.writeRows([['12'], ['twelve']]);
      await sink.commit();
    } catch (err) {
      failure = err;
      await sink.abort();
    }
    expect(String(failure)).toBe(
      `OutputError: ${path}: column 'n' holds a value that is not a whole number; this is a bug: please report it`,
    );
    expect(() => readFileSync(path)).toThrow(/ENOENT/);
  });
});
