import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import { column, parseCsv, tempDir } from '../helpers/map-e2e-data.js';
import { runCli } from '../helpers/map-e2e-processes.js';

// `\N`, the NULL of Snowflake, PostgreSQL and MySQL unloads, in an identifier cell is missing, not invalid; --null-value
// adds markers. The cells are written back as they were read.
const dir = tempDir('null-markers');
const LOCAL = ['--env', 'local', '--quiet'];

/** An unload with NULLs written `\N` and, in one row, `NULL`. */
const UNLOAD = [
  'id,email,phone',
  '1,a@example.com,\\N',
  '2,\\N,+16175550102',
  '3,NULL,\\N',
  '4,b@example.com,+16175550103',
].join('\n');

let input: string;

beforeAll(() => {
  ensureBuilt();
  input = dir.file('unload.csv', `${UNLOAD}\n`);
}, 120_000);

afterAll(() => dir.remove());

describe('NULL markers in identifier cells', () => {
  it.each([['0'], ['2']])(
    'map, --threads %s: \\N is missing and counted so; the cells stay as read',
    async (threads) => {
      const summary = dir.file(`summary-${threads}.json`);
      const run = await runCli([
        'map',
        input,
        '--email-col',
        'email',
        '--phone-col',
        'phone',
        ...LOCAL,
        '--threads',
        threads,
        '--summary-json',
        summary,
      ]);
      expect(run.code, run.stderr).toBe(0);
      const table = parseCsv(run.stdout);
      expect(column(table, 'email_status')).toEqual(['mapped', 'missing', 'invalid', 'mapped']);
      expect(column(table, 'phone_status')).toEqual(['missing', 'mapped', 'missing', 'mapped']);
      expect(column(table, 'email')).toEqual(['a@example.com', '\\N', 'NULL', 'b@example.com']);
      expect(column(table, 'phone')).toEqual(['\\N', '+16175550102', '\\N', '+16175550103']);
      const counts = JSON.parse(readFileSync(summary, 'utf8')) as { status: Record<string, number> };
      expect(counts.status).toMatchObject({ mapped: 4, invalid: 1, missing: 3 });
    },
  );

  it('map --null-value NULL adds a marker (repeatable)', async () => {
    const run = await runCli([
      'map',
      input,
      '--email-col',
      'email',
      '--phone-col',
      'phone',
      '--null-value',
      'NULL',
      '--null-value',
      'n/a',
      ...LOCAL,
    ]);
    expect(run.code, run.stderr).toBe(0);
    const table = parseCsv(run.stdout);
    expect(column(table, 'email_status')).toEqual(['mapped', 'missing', 'missing', 'mapped']);
    expect(column(table, 'email')).toEqual(['a@example.com', '\\N', 'NULL', 'b@example.com']);
  });

  it.each([['0'], ['2']])('hash, --threads %s: \\N is missing', async (threads) => {
    const run = await runCli(['hash', input, '--email-col', 'email', '--quiet', '--threads', threads]);
    expect(run.code, run.stderr).toBe(0);
    const table = parseCsv(run.stdout);
    expect(column(table, 'status')).toEqual(['ok', 'missing', 'invalid', 'ok']);
    expect(column(table, 'email')).toEqual(['a@example.com', '\\N', 'NULL', 'b@example.com']);
  });
});
