import { parse } from 'csv-parse/sync';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A temp directory for one test file; remove() in afterAll. */
export function tempDir(prefix: string): {
  path: string;
  file(name: string, content?: string | Uint8Array): string;
  remove(): void;
} {
  const path = mkdtempSync(join(tmpdir(), `uid2-test-${prefix}-`));
  return {
    path,
    file(name, content) {
      const p = join(path, name);
      if (content !== undefined) writeFileSync(p, content);
      return p;
    },
    remove() {
      rmSync(path, { recursive: true, force: true });
    },
  };
}

/** The address of row i of emailRows: every 50th invalid, every 97th repeating an earlier row's address. */
export function emailOfRow(i: number, prefix = 'user'): string {
  if (i % 50 === 49) return `broken-${i}`;
  if (i % 97 === 96) return emailOfRow(i - 90, prefix);
  return `${prefix}.${i}@example.com`;
}

/** `n` rows `id,email` (see emailOfRow). */
export function emailRows(n: number, prefix = 'user'): string {
  const lines = ['id,email'];
  for (let i = 0; i < n; i++) lines.push(`${i},${emailOfRow(i, prefix)}`);
  return `${lines.join('\n')}\n`;
}

/** Parses the CSV the CLI writes (reasons may hold commas, so they come quoted). */
export function parseCsv(text: string): { header: string[]; rows: string[][] } {
  const records = parse(text, { relax_column_count: true }) as string[][];
  return { header: records[0] ?? [], rows: records.slice(1) };
}

/** The cells of column `name` of every row. */
export function column(table: { header: string[]; rows: string[][] }, name: string): string[] {
  const i = table.header.indexOf(name);
  if (i < 0) throw new Error(`no column ${name} in ${table.header.join(',')}`);
  return table.rows.map((r) => r[i]);
}
