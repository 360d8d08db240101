// Wide inputs cost time linear in their columns: a 20,000-column Parquet file (read a column at a time, each with
// the metadata of that column alone) and a 200,000-column CSV are mapped, and SIGTERM during such a read ends the run.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ByteWriter, ParquetWriter } from 'hyparquet-writer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import { tempDir } from '../helpers/map-e2e-data.js';
import { runCli, spawnCli, type CliResult } from '../helpers/map-e2e-processes.js';

const dir = tempDir('map-wide');
const PARQUET_COLUMNS = 20_000;
const CSV_COLUMNS = 200_000;
const ROWS = 3;
let parquetPath = '';
let csvPath = '';

const emailOf = (r: number) => `wide${r}@example.com`;

/** A Parquet file of string columns: `email`, then c1..c(n-1). */
function wideParquet(columns: number, rows: number): Uint8Array {
  const schema: Record<string, unknown>[] = [{ name: 'root', num_children: columns }];
  const columnData: { name: string; data: string[] }[] = [];
  for (let c = 0; c < columns; c++) {
    const name = c === 0 ? 'email' : `c${c}`;
    schema.push({ name, type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'OPTIONAL' });
    columnData.push({ name, data: Array.from({ length: rows }, (_, r) => (c === 0 ? emailOf(r) : `v${r}.${c}`)) });
  }
  const writer = new ByteWriter();
  const pw = new ParquetWriter({ writer, schema: schema as never });
  pw.write({ columnData, rowGroupSize: rows });
  pw.finish();
  return new Uint8Array(writer.getBuffer());
}

function wideCsv(columns: number, rows: number): string {
  const names = ['email'];
  for (let c = 1; c < columns; c++) names.push(`c${c}`);
  const lines = [names.join(',')];
  for (let r = 0; r < rows; r++) lines.push([emailOf(r), ...Array.from({ length: columns - 1 }, () => 'v')].join(','));
  return `${lines.join('\n')}\n`;
}

beforeAll(() => {
  ensureBuilt();
  parquetPath = dir.file('wide.parquet', wideParquet(PARQUET_COLUMNS, ROWS));
  csvPath = dir.file('wide.csv', wideCsv(CSV_COLUMNS, ROWS));
}, 120_000);
afterAll(() => dir.remove());

/** The output's header and rows (no cell of these files holds a comma or a quote). */
function table(path: string): { header: string[]; rows: string[][] } {
  const [header, ...rows] = readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l.length > 0)
    .map((l) => l.split(','));
  return { header, rows };
}

describe('wide inputs', () => {
  for (const threads of ['0', '1']) {
    it(`a ${PARQUET_COLUMNS.toLocaleString('en-US')}-column Parquet file is mapped (--threads ${threads})`, async () => {
      const out = join(dir.path, `parquet-${threads}.csv`);
      const r = await runCli(['map', parquetPath, '--env', 'local', '-o', out, '--quiet', '--threads', threads]);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      const { header, rows } = table(out);
      expect(header.length).toBe(PARQUET_COLUMNS + 5);
      expect(header.slice(PARQUET_COLUMNS - 1)).toEqual([
        `c${PARQUET_COLUMNS - 1}`,
        'raw_uid',
        'prev_raw_uid',
        'refresh_from',
        'status',
        'reason',
      ]);
      expect(rows.map((row) => [row[0], row[PARQUET_COLUMNS - 1], row[PARQUET_COLUMNS + 3]])).toEqual(
        Array.from({ length: ROWS }, (_, r) => [emailOf(r), `v${r}.${PARQUET_COLUMNS - 1}`, 'mapped']),
      );
    }, 180_000);
  }

  it(`a ${CSV_COLUMNS.toLocaleString('en-US')}-column CSV is mapped`, async () => {
    const out = join(dir.path, 'csv.csv');
    const r = await runCli(['map', csvPath, '--env', 'local', '-o', out, '--quiet']);
    expect(r.code).toBe(0);
    const { header, rows } = table(out);
    expect(header.length).toBe(CSV_COLUMNS + 5);
    expect(rows.map((row) => [row[0], row[CSV_COLUMNS + 3]])).toEqual(
      Array.from({ length: ROWS }, (_, r) => [emailOf(r), 'mapped']),
    );
  }, 180_000);

  it('SIGTERM while a wide Parquet file is read ends the run with 130', async () => {
    const summary = join(dir.path, 'term.json');
    const run = spawnCli([
      'map',
      parquetPath,
      '--env',
      'local',
      '-o',
      join(dir.path, 'term.csv'),
      '--threads',
      '0',
      '--summary-json',
      summary,
    ]);
    // the columns are chosen once the file's footer is read; a moment later its rows are being read
    let stderr = '';
    await new Promise<void>((resolve) => {
      run.child.stderr?.on('data', (d: Buffer) => {
        stderr += d.toString();
        if (stderr.includes("using column 'email'")) resolve();
      });
      run.child.once('exit', () => resolve());
    });
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    run.child.kill('SIGTERM');
    const bound = new Promise<null>((resolve) => setTimeout(() => resolve(null), 15_000));
    const r: CliResult | null = await Promise.race([run.done, bound]);
    if (r === null) {
      run.child.kill('SIGKILL');
      await run.done;
    }
    expect(r, 'the run outlived SIGTERM by 15 s').not.toBeNull();
    expect(r?.code).toBe(130);
    expect(JSON.parse(readFileSync(summary, 'utf8'))).toMatchObject({ outcome: 'interrupted', exit_code: 130 });
  }, 180_000);
});
