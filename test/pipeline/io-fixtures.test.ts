import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { ColumnError, resolveIdentifierColumns } from '../../src/pipeline/map/identifier-columns.js';
import { openSource } from '../../src/pipeline/io/source.js';
import { InputError, type InputRow, type TableSource } from '../../src/pipeline/io/table.js';
import { settled } from '../helpers/settled-reading.js';

/** Every file of the bad-input corpus, read as the manifest says it should be. */
const DIR = join(import.meta.dirname, '..', 'fixtures', 'bad-input');

interface Expected {
  expect: 'error' | 'rows';
  line?: number;
  problem?: string;
  hint?: string;
  header?: string[];
  width?: number;
  lines?: number[];
  rows?: number;
  cells?: Record<string, string[]>;
  problems?: Record<string, string>;
  note?: string;
  columns?: 'error';
}

const manifest = JSON.parse(readFileSync(join(DIR, 'manifest.json'), 'utf8')) as { files: Record<string, Expected> };

async function readAll(source: TableSource): Promise<InputRow[]> {
  const rows: InputRow[] = [];
  for await (const chunk of source.rows()) rows.push(...chunk);
  return rows;
}

/** Values that must never reach a message: anything that looks like an email or a phone in the file. */
function personalValues(file: string): string[] {
  const text = readFileSync(join(DIR, file)).toString('latin1');
  return [...text.matchAll(/[^\s,;"]+@[^\s,;"]+|\+\d{6,}/g)].map((m) => m[0]);
}

describe('bad-input corpus', () => {
  test('has at least 25 files, each described by the manifest', () => {
    const files = readdirSync(DIR).filter((f) => f !== 'manifest.json');
    expect(files.length).toBeGreaterThanOrEqual(25);
    expect(files.sort()).toEqual(Object.keys(manifest.files).sort());
  });

  for (const [file, want] of Object.entries(manifest.files)) {
    test(`${file}: ${want.expect === 'error' ? `error${want.line ? ` on line ${want.line}` : ''}` : 'reads'}`, async () => {
      const path = join(DIR, file);
      if (want.expect === 'error') {
        let caught: unknown;
        try {
          await readAll(await openSource(await settled({ path, chunkRows: 2 })));
        } catch (err) {
          caught = err;
        }
        expect(caught).toBeInstanceOf(InputError);
        const err = caught as InputError;
        expect(err.file).toBe(path);
        expect(err.line).toBe(want.line);
        expect(err.message).toContain(path);
        if (want.line !== undefined) expect(err.message).toContain(`line ${want.line}`);
        expect(err.message).toContain(want.problem);
        if (want.hint) expect(err.message).toContain(want.hint);
        expect(err.message).not.toContain('\n');
        for (const value of personalValues(file)) expect(err.message).not.toContain(value);
        return;
      }
      const source = await openSource(await settled({ path, chunkRows: 2 }));
      const rows = await readAll(source);
      if (want.header) expect(source.header).toEqual(want.header);
      if (want.width) expect(source.header).toHaveLength(want.width);
      if (want.lines) expect(rows.map((r) => r.line)).toEqual(want.lines);
      if (want.rows !== undefined) expect(rows).toHaveLength(want.rows);
      for (const row of rows) expect(row.cells).toHaveLength(source.header.length);
      for (const [line, cells] of Object.entries(want.cells ?? {})) {
        expect(rows.find((r) => r.line === Number(line))?.cells).toEqual(cells);
      }
      const flagged = Object.fromEntries(rows.filter((r) => r.problem).map((r) => [String(r.line), r.problem?.kind]));
      expect(flagged).toEqual(want.problems ?? {});
      if (want.note) expect(source.notes.join('\n')).toContain(want.note);
      else expect(source.notes).toEqual([]);
      if (want.columns === 'error') {
        expect(() => resolveIdentifierColumns(source.header, {}, file)).toThrow(ColumnError);
      }
    });
  }
});
