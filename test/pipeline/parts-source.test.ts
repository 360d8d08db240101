import { gzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { InputPartsError } from '../../src/pipeline/io/input-parts.js';
import { openParts } from '../../src/pipeline/io/parts-source.js';
import { openSource } from '../../src/pipeline/io/source.js';
import type { TableSource } from '../../src/pipeline/io/table.js';
import { tempDir } from '../helpers/map-e2e-data.js';
import { settled, settledParts } from '../helpers/settled-reading.js';

const dir = tempDir('parts-source');
afterAll(() => dir.remove());

async function readAll(source: TableSource): Promise<Array<{ file?: string; line: number; cells: string[] }>> {
  const rows: Array<{ file?: string; line: number; cells: string[] }> = [];
  for await (const chunk of source.rows()) {
    // a chunk never mixes parts, so an output per part can be cut at chunk boundaries
    expect(new Set(chunk.map((r) => r.file)).size).toBe(1);
    for (const r of chunk)
      rows.push({ ...(r.file !== undefined ? { file: r.file } : {}), line: r.line, cells: r.cells });
  }
  return rows;
}

async function failure(promise: Promise<unknown>): Promise<InputPartsError> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(InputPartsError);
    return err as InputPartsError;
  }
  throw new Error('expected an InputPartsError');
}

const HEADER = 'id,email,zip';
const line = (i: number) => `${String(i).padStart(4, '0')},user${i}@example.com,02134`;

describe('openParts', () => {
  it('three gzip parts read as the rows of the one file, each with its part and its own line', async () => {
    const all = Array.from({ length: 3000 }, (_, i) => line(i));
    const whole = dir.file('whole.csv', `${HEADER}\n${all.join('\n')}\n`);
    const parts = [0, 1, 2].map((p) =>
      dir.file(`part-${p}.csv.gz`, gzipSync(`${HEADER}\n${all.slice(p * 1000, p * 1000 + 1000).join('\n')}\n`)),
    );
    const want = await readAll(await openSource(await settled({ path: whole, chunkRows: 700 })));
    const source = await openParts(...(await settledParts(parts, { chunkRows: 700 })));
    expect(source.header).toEqual(['id', 'email', 'zip']);
    const got = await readAll(source);
    expect(got.map((r) => r.cells)).toEqual(want.map((r) => r.cells));
    expect(got[0]).toEqual({ file: parts[0], line: 2, cells: ['0000', 'user0@example.com', '02134'] });
    expect(got[1000]).toMatchObject({ file: parts[1], line: 2 });
    expect(got[2999]).toMatchObject({ file: parts[2], line: 1001 });
    expect(source.bytesRead()).toBe(source.totalBytes);
  });

  it('a CSV part with other columns is refused before any row is read, naming the part', async () => {
    const a = dir.file('h-a.csv', `${HEADER}\n${line(1)}\n`);
    const b = dir.file('h-b.csv', `id,email\n1,x@example.com\n`);
    const c = dir.file('h-c.csv', `id,mail,zip\n${line(2)}\n`);
    const count = await failure(openParts(...(await settledParts([a, b]))));
    expect(count.message).toContain(b);
    expect(count.message).toContain('2 columns where the first part has 3');
    const named = await failure(openParts(...(await settledParts([a, c]))));
    expect(named.message).toContain("column 2 is 'mail' where the first part has 'email'");
  });

  it('JSON Lines parts place keys by name, and refuse a key the first part lacks', async () => {
    const a = dir.file('j-a.jsonl', '{"id":"1","email":"a@example.com"}\n');
    const b = dir.file('j-b.jsonl', '{"email":"b@example.com","id":"2"}\n{"email":"c@example.com"}\n');
    const rows = await readAll(await openParts(...(await settledParts([a, b]))));
    expect(rows.map((r) => r.cells)).toEqual([
      ['1', 'a@example.com'],
      ['2', 'b@example.com'],
      ['', 'c@example.com'],
    ]);
    const c = dir.file('j-c.jsonl', '{"id":"3","phone":"+14155550100"}\n');
    expect((await failure(openParts(...(await settledParts([a, c]))))).message).toContain("key 'phone'");
  });

  it('passes over empty parts', async () => {
    const empty = dir.file('e-0.csv', '');
    const a = dir.file('e-1.csv', `${HEADER}\n${line(7)}\n`);
    const rows = await readAll(await openParts(...(await settledParts([empty, a]))));
    expect(rows).toEqual([{ file: a, line: 2, cells: ['0007', 'user7@example.com', '02134'] }]);
  });
});
