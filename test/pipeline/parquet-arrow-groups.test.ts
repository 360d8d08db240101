import { DuckDBInstance } from '@duckdb/node-api';
import { ByteWriter, ParquetWriter } from 'hyparquet-writer';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { ArrowGroups } from '../../src/pipeline/io/parquet/parquet-arrow-groups.js';
import { ARROW_GROUP_BYTES, openParquetSource } from '../../src/pipeline/io/parquet/parquet-source.js';
import { columnCells } from '../../src/pipeline/io/utf8-columns.js';
import { tempDir } from '../helpers/map-e2e-data.js';

const dir = tempDir('parquet-arrow');
afterAll(() => dir.remove());
afterEach(() => {
  vi.restoreAllMocks();
});

const WITH_ARROW = { arrowGroupBytes: ARROW_GROUP_BYTES };
const HYPARQUET_ONLY = { arrowGroupBytes: 0 };

async function duck(sql: string): Promise<void> {
  const db = await DuckDBInstance.create(':memory:');
  const conn = await db.connect();
  try {
    await conn.run(sql);
  } finally {
    conn.closeSync();
    db.closeSync();
  }
}

/** Every row of the file as (line, cells), read as UTF-8 chunks, and as rows, the way `reading` says. */
async function readBoth(path: string, reading: object, chunkRows = 1000) {
  const chunked: { line: number; cells: string[] }[] = [];
  for await (const chunk of (await openParquetSource({ path, chunkRows }, reading)).utf8Chunks()) {
    const columns = chunk.columns.map(columnCells);
    for (let r = 0; r < chunk.rows; r++)
      chunked.push({ line: chunk.firstLine + r, cells: columns.map((cells) => cells[r]) });
  }
  const rows: { line: number; cells: string[] }[] = [];
  for await (const chunk of (await openParquetSource({ path, chunkRows }, reading)).rows())
    for (const row of chunk) rows.push({ line: row.line, cells: row.cells });
  return { chunked, rows };
}

/** The cells of group `group` of `path` as the compiled decoder alone gives them. */
async function decoderCells(path: string, header: string[], group: number, rows: number): Promise<string[][]> {
  const groups = await ArrowGroups.open(path, header);
  if (groups === undefined) throw new Error('not opened');
  const out: string[][] = [];
  try {
    for await (const chunk of groups.group(group, 1, rows, 4)) {
      const columns = chunk.columns.map(columnCells);
      for (let r = 0; r < chunk.rows; r++) out.push(columns.map((cells) => cells[r]));
    }
  } finally {
    groups.close();
  }
  return out;
}

/** A file of BYTE_ARRAY columns (one a string, one plain bytes) holding the cells given, nulls as null. */
function writeBytes(name: string, cells: (Uint8Array | null)[]): string {
  const writer = new ByteWriter();
  const pw = new ParquetWriter({
    writer,
    schema: [
      { name: 'root', num_children: 2 },
      { name: 'text', type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'OPTIONAL' },
      { name: 'raw', type: 'BYTE_ARRAY', repetition_type: 'OPTIONAL' },
    ],
  });
  pw.write({
    columnData: [
      // the bytes as they are in the string column too, UTF-8 or not, as a careless writer leaves them
      { name: 'text', data: cells },
      { name: 'raw', data: cells },
    ],
  });
  pw.finish();
  return dir.file(name, new Uint8Array(writer.getBuffer()));
}

describe('text row groups decoded by parquet-wasm', () => {
  it('gives the cells, lines and chunks hyparquet gives, over groups and chunks that do not line up', async () => {
    const p = dir.file('groups.parquet');
    await duck(
      `COPY (SELECT lpad(i::VARCHAR, 5, '0') AS zip,
                    CASE WHEN i % 7 = 0 THEN NULL WHEN i % 7 = 1 THEN '' ELSE 'Zoë.' || i || '@example.com' END AS email,
                    CASE WHEN i % 5 = 0 THEN '名前 ' || i ELSE 'plain ' || i END AS note
             FROM range(25003) t(i)) TO '${p}' (FORMAT parquet, ROW_GROUP_SIZE 12000)`,
    );
    const open = vi.spyOn(ArrowGroups, 'open');
    const arrow = await readBoth(p, WITH_ARROW, 700);
    expect(open).toHaveBeenCalled();
    expect(await open.mock.results[0].value).toBeInstanceOf(ArrowGroups);
    const hyparquet = await readBoth(p, HYPARQUET_ONLY, 700);
    expect(arrow.chunked.length).toBe(25003);
    expect(arrow.chunked).toEqual(hyparquet.chunked);
    expect(arrow.rows).toEqual(hyparquet.rows);
    expect(arrow.rows).toEqual(arrow.chunked);
    expect(arrow.rows[7]).toEqual({ line: 8, cells: ['00007', '', 'plain 7'] });
    expect(arrow.rows[10]).toEqual({ line: 11, cells: ['00010', 'Zoë.10@example.com', '名前 10'] });
    expect(arrow.rows[25002].line).toBe(25003);
  });

  it('non-ASCII bytes as a UTF-8 decoder reads them, as hyparquet gives them: a leading BOM dropped', async () => {
    const utf8 = new TextEncoder();
    const cells = [
      utf8.encode('a@example.com'),
      null,
      utf8.encode(''),
      Uint8Array.of(0xef, 0xbb, 0xbf, 0x62, 0x40, 0x78),
      utf8.encode('Müller 😀'),
      utf8.encode('007'),
    ];
    const p = writeBytes('bytes.parquet', cells);
    const open = vi.spyOn(ArrowGroups, 'open');
    const arrow = await readBoth(p, WITH_ARROW);
    expect(await open.mock.results[0].value).toBeInstanceOf(ArrowGroups);
    expect(arrow.rows).toEqual((await readBoth(p, HYPARQUET_ONLY)).rows);
    expect(arrow.rows.map((r) => r.cells[1])).toEqual(['a@example.com', '', '', 'b@x', 'Müller 😀', '007']);
    expect(await decoderCells(p, ['text', 'raw'], 0, cells.length)).toEqual(arrow.rows.map((r) => r.cells));
  });

  it('a group the decoder refuses (bytes that are not UTF-8 in a string column) is read by hyparquet instead', async () => {
    const p = writeBytes('not-utf8.parquet', [Uint8Array.of(0x61, 0xff, 0x62), Uint8Array.of(0x63)]);
    await expect(decoderCells(p, ['text', 'raw'], 0, 2)).rejects.toThrow();
    const arrow = await readBoth(p, WITH_ARROW);
    expect(arrow.rows).toEqual((await readBoth(p, HYPARQUET_ONLY)).rows);
    expect(arrow.rows.map((r) => r.cells)).toEqual([
      ['a\uFFFDb', 'a\uFFFDb'],
      ['c', 'c'],
    ]);
  });

  it('a file with a column that is not text is not opened by it', async () => {
    const p = dir.file('typed.parquet');
    await duck(`COPY (SELECT 'a@example.com' AS email, 7::BIGINT AS n) TO '${p}' (FORMAT parquet)`);
    expect(await ArrowGroups.open(p, ['email', 'n'])).toBeUndefined();
    const arrow = await readBoth(p, WITH_ARROW);
    expect(arrow.rows).toEqual([{ line: 1, cells: ['a@example.com', '7'] }]);
  });

  it('is not used by default, nor for a group above its size', async () => {
    const p = dir.file('default.parquet');
    await duck(`COPY (SELECT 'a@example.com' AS email) TO '${p}' (FORMAT parquet)`);
    const open = vi.spyOn(ArrowGroups, 'open');
    await readBoth(p, {});
    await readBoth(p, { arrowGroupBytes: 1 });
    expect(open).not.toHaveBeenCalled();
  });
});
