import { asyncBufferFromFile, parquetReadObjects } from 'hyparquet';
import { ByteWriter, ParquetWriter } from 'hyparquet-writer';
import { afterAll, describe, expect, it } from 'vitest';
import { openParquetSource } from '../../src/pipeline/io/parquet/parquet-source.js';
import { columnCells, utf8Column, type TextCell } from '../../src/pipeline/io/utf8-columns.js';
import { tempDir } from '../helpers/map-e2e-data.js';
import { settled } from '../helpers/settled-reading.js';

const dir = tempDir('utf8-columns');
afterAll(() => dir.remove());

const utf8 = new TextEncoder();
/** What a reader that decodes every stored string gives for these bytes. */
const decoded = (cells: TextCell[]) => cells.map((c) => (typeof c === 'string' ? c : new TextDecoder().decode(c)));

describe('text cells kept as UTF-8 column bytes', () => {
  it('gives ASCII cells back as stored, copied byte for byte', () => {
    const cells: TextCell[] = ['a@example.com', '', '02134', 'x'.repeat(100)].map((s) => utf8.encode(s));
    cells.push('');
    const column = utf8Column(cells, 0, cells.length);
    expect(column.ascii).toBe(true);
    expect([...column.lengths]).toEqual([13, 0, 5, 100, 0]);
    expect(columnCells(column)).toEqual(['a@example.com', '', '02134', 'x'.repeat(100), '']);
  });

  it('gives other bytes back as a UTF-8 decoder reads them: a leading BOM dropped, malformed bytes replaced', () => {
    const cells: TextCell[] = [
      utf8.encode('Zoë Müller'),
      Uint8Array.of(0xef, 0xbb, 0xbf, 0x61, 0x62),
      Uint8Array.of(0x61, 0xff, 0x62),
      Uint8Array.of(0x61, 0xe2, 0x82),
      utf8.encode('😀 ok'),
      utf8.encode('plain'),
      '',
    ];
    const column = utf8Column(cells, 0, cells.length);
    expect(column.ascii).toBe(false);
    const back = columnCells(column);
    expect(back).toEqual(decoded(cells));
    expect(back[1]).toBe('ab');
    expect(back[2]).toBe('a\ufffdb');
  });

  it('takes a run of cells from the middle, and text cells among the bytes', () => {
    const cells: TextCell[] = [utf8.encode('skip'), 'text ✓', utf8.encode('bytes'), '', utf8.encode('tail')];
    expect(columnCells(utf8Column(cells, 1, 4))).toEqual(['text ✓', 'bytes', '']);
    expect(columnCells(utf8Column(cells, 2, 5))).toEqual(['bytes', '', 'tail']);
  });
});

describe('a Parquet file read as UTF-8 columns', () => {
  const N = 5_003;
  const names = Array.from({ length: N }, (_, i) =>
    i % 7 === 0 ? `\ufeffBOM ${i}` : i % 5 === 0 ? `Zoë ${i} 😀` : i % 11 === 0 ? null : `name${i}`,
  );
  const ids = Array.from({ length: N }, (_, i) => BigInt(i) * 1_000_000_007n);
  const zips = Array.from({ length: N }, (_, i) => String(i % 1000).padStart(5, '0'));

  function write(): string {
    const writer = new ByteWriter();
    const pw = new ParquetWriter({
      writer,
      schema: [
        { name: 'root', num_children: 3 },
        { name: 'name', type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'OPTIONAL' },
        { name: 'id', type: 'INT64', repetition_type: 'REQUIRED' },
        { name: 'zip', type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'REQUIRED' },
      ],
    });
    pw.write({
      columnData: [
        { name: 'name', data: names },
        { name: 'id', data: ids },
        { name: 'zip', data: zips },
      ],
      rowGroupSize: 2_000,
    });
    pw.finish();
    return dir.file('text.parquet', new Uint8Array(writer.getBuffer()));
  }

  it('gives the cells that rows() gives, and that hyparquet decodes itself', async () => {
    const path = write();
    const columns: string[][] = [];
    const lines: number[] = [];
    for await (const chunk of (await openParquetSource(await settled({ path, chunkRows: 700 }))).utf8Chunks()) {
      const cells = chunk.columns.map(columnCells);
      for (let r = 0; r < chunk.rows; r++) {
        columns.push(cells.map((c) => c[r]));
        lines.push(chunk.firstLine + r);
      }
    }
    const rows: string[][] = [];
    for await (const chunk of (await openParquetSource(await settled({ path, chunkRows: 700 }))).rows())
      for (const r of chunk) rows.push(r.cells);
    expect(columns).toEqual(rows);
    expect(lines).toEqual(rows.map((_, i) => i + 1));
    const theirs = await parquetReadObjects({ file: await asyncBufferFromFile(path) });
    expect(columns).toEqual(theirs.map((o) => [o.name ?? '', String(o.id), o.zip]));
    expect(columns[7][0]).toBe('BOM 7');
    expect(columns[5][0]).toBe('Zoë 5 😀');
  });
});
