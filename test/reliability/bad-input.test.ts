import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, type CliResult } from '../helpers/map-e2e-processes.js';
import { requireBuilt, stackLines, tempDir } from './harness.js';
import { recordWhenPassed } from './results.js';

/**
 * Every file of test/fixtures/bad-input through the BUILT CLI: `map --env local` and `hash` (and `optout-check
 * --env local` where it applies). Each run ends with an exit code of docs/architecture.md §5 and either a clear status
 * and reason per row, or one error line naming the file, the line and the problem; never a stack trace, never a
 * personal value on stderr, never an output file that looks complete after a failure.
 *
 * Expectations: the manifest (what openSource reads; see test/pipeline/io-fixtures.test.ts) and its optional
 * `cli` field; rows are checked against the fixture's own expectation columns when it has them:
 * `normalized` (email files: empty = invalid), `valid` (phones: 1/0), `expected` (hash files: the base64 hash,
 * empty = invalid; raw-UID files: false/invalid), `expected_status` and `<column>_expected` (map statuses).
 */

const DIR = join(import.meta.dirname, '..', 'fixtures', 'bad-input');

type Command = 'map' | 'hash' | 'optout-check';

interface CliExpectation {
  commands?: Command[];
  args?: string[];
  exit?: number;
  /** Text the one error line must contain (besides the file name). */
  message?: string;
}

interface Entry {
  expect: 'error' | 'rows';
  line?: number;
  problem?: string;
  header?: string[];
  lines?: number[];
  rows?: number;
  columns?: 'error';
  cli?: CliExpectation;
}

const manifest = JSON.parse(readFileSync(join(DIR, 'manifest.json'), 'utf8')) as { files: Record<string, Entry> };
const files = readdirSync(DIR)
  .filter((f) => f !== 'manifest.json')
  .sort();

const sha256 = (text: string): string => createHash('sha256').update(text, 'utf8').digest('base64');

/** Values that must never reach stderr: anything in the file that looks like an email or a phone. */
function personalValues(path: string): string[] {
  const text = readFileSync(path).toString('latin1');
  return [...new Set([...text.matchAll(/[^\s,;"{}:]+@[^\s,;"{}:]+|\+\d{6,}/g)].map((m) => m[0]))].filter(
    (v) => v.length > 3,
  );
}

function commandsOf(entry: Entry): Command[] {
  return entry.cli?.commands ?? ['map', 'hash'];
}

function expectedExit(entry: Entry): number {
  if (entry.cli?.exit !== undefined) return entry.cli.exit;
  if (entry.expect === 'error') return 1;
  if (entry.columns === 'error') return 2;
  return 0;
}

interface Tally {
  runs: number;
  rows: number;
  errorsWithLine: number;
}
const tally: Tally = { runs: 0, rows: 0, errorsWithLine: 0 };

const work = tempDir('bad-input');
let n = 0;

async function run(
  command: Command,
  file: string,
  extra: string[] = [],
): Promise<{ res: CliResult; out: string; outDir: string }> {
  const outDir = work.file(`run-${++n}`);
  const { mkdirSync } = await import('node:fs');
  mkdirSync(outDir);
  const out = join(outDir, 'out.csv');
  const args = [
    command,
    file,
    '-o',
    out,
    '--summary-json',
    join(outDir, 'summary.json'),
    ...(command === 'hash' ? [] : ['--env', 'local']),
    ...extra,
  ];
  const res = await runCli(args);
  tally.runs++;
  return { res, out, outDir };
}

function table(text: string): Record<string, string>[] {
  return parse(text, { columns: true, bom: true, relax_column_count: false }) as Record<string, string>[];
}

/** Statuses of a cell that is not sent: a value the service would refuse, or no value at all. */
const NOT_SENT = ['invalid', 'missing'];

/** The status and reason columns the command added: one pair per identifier column. */
function statusColumns(row: Record<string, string>, inputHeader: readonly string[] | undefined): [string, string][] {
  return Object.keys(row)
    .filter((k) => (k === 'status' || k.endsWith('_status')) && !(inputHeader ?? []).includes(k))
    .map((k) => [k, k.replace(/status$/, 'reason')]);
}

/** The checks every successful run gets: a status per identifier cell, a reason for each one not done. */
function checkRows(command: Command, rows: Record<string, string>[], inputHeader: readonly string[] | undefined): void {
  for (const row of rows) {
    if (command === 'optout-check') {
      const verdict = row.opted_out;
      expect(['true', 'false', '']).toContain(verdict);
      if (verdict === '') expect(row.reason, JSON.stringify(row)).not.toBe('');
      continue;
    }
    const pairs = statusColumns(row, inputHeader);
    expect(pairs.length).toBeGreaterThan(0);
    for (const [status, reason] of pairs) {
      // `missing`: an empty cell (reason `empty`), told apart from an invalid value
      const allowed = command === 'map' ? ['mapped', 'optout', ...NOT_SENT] : ['ok', ...NOT_SENT];
      expect(allowed, JSON.stringify(row)).toContain(row[status]);
      if (NOT_SENT.includes(row[status] ?? '')) expect(row[reason], JSON.stringify(row)).not.toBe('');
      if (row[status] === 'missing') expect(row[reason]).toBe('empty');
    }
  }
}

/** The fixture's own expectation columns, checked against what the command wrote. */
function checkExpectations(command: Command, rows: Record<string, string>[]): void {
  for (const row of rows) {
    const where = JSON.stringify(row).slice(0, 300);
    if ('normalized' in row && 'email' in row) {
      const ok = row.normalized !== '';
      if (command === 'map') expect(row.status === 'mapped' || row.status === 'optout', where).toBe(ok);
      if (command === 'hash') {
        if (ok) expect(row.status, where).toBe('ok');
        else expect(NOT_SENT, where).toContain(row.status);
        if (ok) expect(row.hash, where).toBe(sha256(row.normalized));
      }
    }
    if ('valid' in row && 'phone' in row) {
      const ok = row.valid === '1';
      if (command === 'map') expect(row.status === 'mapped' || row.status === 'optout', where).toBe(ok);
      if (command === 'hash') {
        if (ok) expect(row.status, where).toBe('ok');
        else expect(NOT_SENT, where).toContain(row.status);
        if (ok) expect(row.hash, where).toBe(sha256(row.phone));
      }
    }
    if ('expected' in row && command !== 'optout-check') {
      const ok = row.expected !== '';
      if (command === 'map') expect(row.status === 'mapped' || row.status === 'optout', where).toBe(ok);
      if (command === 'hash') {
        if (ok) expect(row.status, where).toBe('ok');
        else expect(NOT_SENT, where).toContain(row.status);
        if (ok) expect(row.hash, where).toBe(row.expected);
      }
    }
    if ('expected' in row && command === 'optout-check') {
      if (row.expected === 'invalid') expect(row.opted_out, where).toBe('');
      else expect(row.opted_out, where).toBe(row.expected);
    }
    // `invalid` in an expectation column covers an empty cell too (status `missing`)
    const same = (got: string | undefined, want: string | undefined): boolean =>
      got === want || (want === 'invalid' && got === 'missing');
    if ('expected_status' in row && command === 'map') expect(same(row.status, row.expected_status), where).toBe(true);
    for (const key of Object.keys(row)) {
      const m = /^(.+)_expected$/.exec(key);
      if (m && command === 'map') expect(same(row[`${m[1]}_status`], row[key]), where).toBe(true);
    }
  }
}

/** One error line: the last line of stderr, naming the file (and the line when the manifest knows it). */
function checkErrorLine(stderr: string, path: string, entry: Entry): void {
  const lines = stderr.split('\n').filter((l) => l.trim() !== '');
  const last = lines[lines.length - 1] ?? '';
  expect(last.startsWith('uid2-batch: '), stderr).toBe(true);
  expect(last, stderr).toContain(path);
  if (entry.expect === 'error') {
    if (entry.line !== undefined) expect(last).toContain(`line ${entry.line}`);
    if (entry.problem !== undefined) expect(last).toContain(entry.problem);
  }
  if (entry.cli?.message !== undefined) expect(last).toContain(entry.cli.message);
}

recordWhenPassed('bad_input', () => ({
  bad_input_files: files.length + 2,
  cli_runs: tally.runs,
  rows_checked: tally.rows,
  error_lines_checked: tally.errorsWithLine,
}));

beforeAll(() => {
  requireBuilt();
});

afterAll(() => {
  work.remove();
});

describe('bad-input corpus through the built CLI', () => {
  it('has at least 60 files, each described by the manifest', () => {
    expect(files.length).toBeGreaterThanOrEqual(60);
    expect(files).toEqual(Object.keys(manifest.files).sort());
  });

  for (const file of files) {
    const entry = manifest.files[file];
    if (entry === undefined) continue;
    const exit = expectedExit(entry);
    it.concurrent(`${file}: ${commandsOf(entry).join(', ')} exit ${exit}`, async () => {
      const path = join(DIR, file);
      const pii = personalValues(path);
      const counts: Partial<Record<Command, number>> = {};
      for (const command of commandsOf(entry)) {
        const { res, out, outDir } = await run(command, path, entry.cli?.args ?? []);
        const label = `${command} ${file}\n${res.stderr}`;
        expect(stackLines(res.stderr), label).toEqual([]);
        expect(res.code, label).toBe(exit);
        for (const value of pii) expect(res.stderr.includes(value), `${label}\nleaks ${value}`).toBe(false);
        if (exit !== 0) {
          checkErrorLine(res.stderr, path, entry);
          tally.errorsWithLine++;
          // no output that looks complete, and nothing half-written left beside it
          expect(
            readdirSync(outDir).filter((f) => f !== 'summary.json'),
            label,
          ).toEqual([]);
          continue;
        }
        expect(existsSync(out), label).toBe(true);
        const text = readFileSync(out, 'utf8');
        const rows = text === '' ? [] : table(text);
        checkRows(command, rows, entry.header);
        checkExpectations(command, rows);
        counts[command] = rows.length;
        tally.rows += rows.length;
        if (entry.lines !== undefined) expect(rows.length, label).toBe(entry.lines.length);
        if (entry.rows !== undefined) expect(rows.length, label).toBe(entry.rows);
        if (command === 'map') {
          const summary = JSON.parse(readFileSync(join(outDir, 'summary.json'), 'utf8')) as {
            rows: number;
            status: Record<string, number>;
          };
          expect(summary.rows).toBe(rows.length);
        }
      }
      // the offline and the online paths read the same rows
      if (counts.map !== undefined && counts.hash !== undefined) expect(counts.hash).toBe(counts.map);
    });
  }

  describe('generated', () => {
    it('a 10 MB single line: one row, mapped, and the short row after it too', async () => {
      const local = 'x'.repeat(10 * 1024 * 1024);
      const path = work.file('line-10mb.csv', `id,email\n1,${local}@example.com\n2,a@example.com\n`);
      const [map, hash] = await Promise.all([run('map', path), run('hash', path)]);
      for (const r of [map, hash]) {
        expect(stackLines(r.res.stderr)).toEqual([]);
        expect(r.res.code, r.res.stderr).toBe(0);
      }
      const mapped = table(readFileSync(map.out, 'utf8'));
      expect(mapped.map((r) => r.status)).toEqual(['mapped', 'mapped']);
      expect(mapped[0]!.email.length).toBe(local.length + '@example.com'.length);
      const hashed = table(readFileSync(hash.out, 'utf8'));
      expect(hashed[0]!.hash).toBe(sha256(`${local}@example.com`));
      expect(hashed[1]!.hash).toBe(sha256('a@example.com'));
      tally.rows += 4;
    }, 120_000);

    it('a 17 MB record (past the 16 MB limit): one error line naming the file and line 2, no output', async () => {
      const path = work.file('line-17mb.csv', `id,email\n1,${'x'.repeat(17 * 1024 * 1024)}@example.com\n`);
      const r = await run('map', path);
      expect(stackLines(r.res.stderr)).toEqual([]);
      expect(r.res.code).toBe(1);
      checkErrorLine(r.res.stderr, path, { expect: 'error', line: 2, problem: 'longer than 16 MB' });
      expect(readdirSync(r.outDir).filter((f) => f !== 'summary.json')).toEqual([]);
      tally.errorsWithLine++;
    }, 60_000);
  });
});
