import { afterAll, describe, expect, it } from 'vitest';
import { asyncBufferFromFile, parquetMetadata, readOffsetIndex } from 'hyparquet';
import { ByteWriter, ParquetWriter } from 'hyparquet-writer';
import { pageLocationsOf } from '../../src/pipeline/io/parquet/parquet-pages.js';
import { openSource } from '../../src/pipeline/io/source.js';
import { tempDir } from '../helpers/map-e2e-data.js';

const dir = tempDir('parquet-pages');
afterAll(() => dir.remove());

const N = 30_011;
const emails = Array.from({ length: N }, (_, i) => (i % 97 === 0 ? '' : `user${i}@example.com`));
const zips = Array.from({ length: N }, (_, i) => String(i % 100_000).padStart(5, '0'));
const notes = Array.from({ length: N }, (_, i) => (i % 5 === 0 ? null : `note ${i % 13}`));

/** One row group of N rows in pages of `pageSize` bytes, with or without an offset index. */
function oneGroupFile(name: string, offsetIndex: boolean, pageSize: number): { path: string; bytes: Uint8Array } {
  const writer = new ByteWriter();
  const pw = new ParquetWriter({
    writer,
    schema: [
      { name: 'root', num_children: 3 },
      { name: 'email', type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'OPTIONAL' },
      { name: 'zip', type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'REQUIRED' },
      { name: 'note', type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'OPTIONAL' },
    ],
  });
  pw.write({
    columnData: [
      { name: 'email', data: emails, offsetIndex },
      { name: 'zip', data: zips, offsetIndex },
      { name: 'note', data: notes, offsetIndex },
    ],
    rowGroupSize: N,
    pageSize,
  });
  pw.finish();
  const bytes = new Uint8Array(writer.getBuffer());
  return { path: dir.file(name, bytes), bytes };
}

async function readAll(path: string): Promise<{ cells: string[][]; lines: number[] }> {
  const cells: string[][] = [];
  const lines: number[] = [];
  for await (const chunk of (await openSource({ path, chunkRows: 3000 })).rows())
    for (const r of chunk) {
      cells.push(r.cells);
      lines.push(r.line);
    }
  return { cells, lines };
}

const expected = emails.map((e, i) => [e, zips[i], notes[i] ?? '']);

describe('Parquet pages located from their headers', () => {
  it('are where the offset index says they are, dictionary pages left out', async () => {
    const { path, bytes } = oneGroupFile('indexed.parquet', true, 4096);
    const meta = parquetMetadata(bytes.buffer as ArrayBuffer);
    const located = await pageLocationsOf(await asyncBufferFromFile(path), meta, 0, new Set(['email', 'zip', 'note']));
    expect(located).toBeDefined();
    for (const chunk of meta.row_groups[0].columns) {
      const start = Number(chunk.offset_index_offset);
      const index = readOffsetIndex({
        view: new DataView(bytes.buffer, start, chunk.offset_index_length),
        offset: 0,
      });
      const name = chunk.meta_data?.path_in_schema.join('.') as string;
      expect(index.page_locations.length).toBeGreaterThan(3);
      expect(located?.[name]).toEqual(index.page_locations);
    }
  });

  it('are not told for a column the caller does not count as flat (nested in a list)', async () => {
    const { path, bytes } = oneGroupFile('flat-only.parquet', false, 4096);
    const meta = parquetMetadata(bytes.buffer as ArrayBuffer);
    expect(await pageLocationsOf(await asyncBufferFromFile(path), meta, 0, new Set(['email', 'zip']))).toBeUndefined();
  });

  it('let one big row group without an offset index be read in slices, rows in order, each as stored', async () => {
    const { path } = oneGroupFile('no-index.parquet', false, 4096);
    const back = await readAll(path);
    expect(back.cells).toEqual(expected);
    expect(back.lines).toEqual(expected.map((_, i) => i + 1));
  });

  it('a row group that is one page per column is read whole, and right', async () => {
    const { path } = oneGroupFile('one-page.parquet', false, 64 * 1024 * 1024);
    const back = await readAll(path);
    expect(back.cells).toEqual(expected);
  });
});
