import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { PartSinks } from '../../src/pipeline/io/output/part-sinks.js';
import { tempDir } from '../helpers/map-e2e-data.js';

const dir = tempDir('part-sinks');
afterAll(() => dir.remove());

const rowsOf = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => [String(from + i)]);

function outputs(prefix: string, n: number) {
  return Array.from({ length: n }, (_, i) => ({
    path: dir.file(`${prefix}-${i}.csv`),
    format: 'csv' as const,
    header: ['id'],
  }));
}

describe('PartSinks', () => {
  it('cuts rows back into their parts, also when a part is known to end only after its rows were written', async () => {
    const ends: number[] = [];
    const outs = outputs('cut', 4);
    const sinks = new PartSinks(outs, () => ends);
    // part 0 holds rows 0..4; its end is learned only when part 1 is read into
    await sinks.writeRows(rowsOf(0, 3));
    await sinks.writeRows(rowsOf(3, 5));
    ends.push(5);
    // part 1 holds 5..7, part 2 is empty, part 3 holds 8..9; a write may span parts
    ends.push(8, 8);
    await sinks.writeRows(rowsOf(5, 9));
    expect(sinks.completed).toBe(3);
    // complete parts wait beside their targets: all are renamed into place together by commit()
    for (const out of outs) expect(existsSync(out.path)).toBe(false);
    ends.push(10);
    await sinks.writeRows(rowsOf(9, 10));
    await sinks.commit();
    const read = (i: number) => readFileSync(outs[i].path, 'utf8');
    expect(read(0)).toBe('id\n0\n1\n2\n3\n4\n');
    expect(read(1)).toBe('id\n5\n6\n7\n');
    expect(read(2)).toBe('id\n');
    expect(read(3)).toBe('id\n8\n9\n');
  });

  it('abort replaces no output, not even of the parts already complete, and leaves no temp file', async () => {
    const ends = [2];
    const outs = outputs('abort', 2);
    writeFileSync(outs[0].path, 'an earlier run\n');
    const sinks = new PartSinks(outs, () => ends);
    await sinks.writeRows(rowsOf(0, 3));
    expect(sinks.completed).toBe(1);
    await sinks.abort();
    expect(readFileSync(outs[0].path, 'utf8')).toBe('an earlier run\n');
    expect(existsSync(outs[1].path)).toBe(false);
    expect(readdirSync(dir.path).filter((n) => n.endsWith('.tmp'))).toEqual([]);
  });
});
