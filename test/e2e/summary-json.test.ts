import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, ROOT } from '../helpers/map-e2e-build.js';
import { tempDir } from '../helpers/map-e2e-data.js';
import { runCli } from '../helpers/map-e2e-processes.js';

// --summary-json is written whenever it is given: with the outcome, the exit code and, for a failure, the same
// error line as on stderr, also when the run failed before it read anything.

const dir = tempDir('summary-json');
const SAMPLE = join(ROOT, 'samples', 'customers.csv');

beforeAll(() => ensureBuilt(), 120_000);
afterAll(() => dir.remove());

const summaryAt = (path: string): Record<string, unknown> =>
  JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
const stderrLine = (stderr: string): string => stderr.trim().replace(/^uid2-batch: /, '');

describe('--summary-json', () => {
  it('a missing input file: outcome failed, the error and the exit code', async () => {
    const s = join(dir.path, 'missing.json');
    const r = await runCli([
      'map',
      join(dir.path, 'no-such.csv'),
      '--env',
      'local',
      '-o',
      join(dir.path, 'o.csv'),
      '--summary-json',
      s,
    ]);
    expect(r.code).not.toBe(0);
    expect(summaryAt(s)).toEqual({ command: 'map', outcome: 'failed', exit_code: r.code, error: stderrLine(r.stderr) });
  });

  it('a usage error while the flags are read (a flag given twice): exit 2 in the file', async () => {
    const s = join(dir.path, 'usage.json');
    const r = await runCli(['hash', SAMPLE, '--format', 'csv', '--format', 'jsonl', '--summary-json', s]);
    expect(r.code).toBe(2);
    expect(summaryAt(s)).toMatchObject({
      command: 'hash',
      outcome: 'failed',
      exit_code: 2,
      error: stderrLine(r.stderr),
    });
  });

  it('a run that completed: its own summary, with outcome and exit code added', async () => {
    const s = join(dir.path, 'ok.json');
    const r = await runCli(['hash', SAMPLE, '-o', join(dir.path, 'h.csv'), '-q', '--summary-json', s]);
    expect(r.code, r.stderr).toBe(0);
    expect(summaryAt(s)).toMatchObject({ command: 'hash', rows: 3000, outcome: 'completed', exit_code: 0 });
    expect(summaryAt(s)).not.toHaveProperty('error');
  });

  it('a 20 KB binary column name is clipped on stderr and in the summary', async () => {
    const name = Buffer.alloc(20_000);
    for (let i = 0; i < name.length; i++) name[i] = 0x80 + (i % 0x7f);
    const input = dir.file('binary-header.csv', Buffer.concat([Buffer.from('id,'), name, Buffer.from('\n1,x\n')]));
    const s = join(dir.path, 'binary.json');
    const r = await runCli(['hash', input, '--encoding', 'latin1', '-o', join(dir.path, 'b.csv'), '--summary-json', s]);
    expect(r.code).toBe(2);
    expect(r.stderr.length).toBeLessThan(600);
    expect(String(summaryAt(s).error).length).toBeLessThan(600);
  });

  it('is never written over a file that is not a summary (the input given by mistake)', async () => {
    const input = dir.file('precious.csv', 'email\na@example.com\n');
    const r = await runCli(['hash', input, '--summary-json', input]);
    expect(r.code).toBe(2);
    expect(readFileSync(input, 'utf8')).toBe('email\na@example.com\n');
  });

  it('refuses, before anything is sent, a --summary-json that is an existing CSV or an unrelated JSON', async () => {
    for (const [name, content] of [
      ['other-input.csv', 'email\nb@example.com\n'],
      ['settings.json', '{"name":"settings","retries":3}\n'],
    ]) {
      const foreign = dir.file(name, content);
      const out = join(dir.path, `not-written-${name}.csv`);
      const r = await runCli(['map', SAMPLE, '--env', 'local', '-o', out, '--summary-json', foreign]);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toMatch(/^uid2-batch: --summary-json '.*' exists and is not a run summary: .*\n$/);
      expect(readFileSync(foreign, 'utf8')).toBe(content);
      expect(existsSync(out)).toBe(false);
    }
  });

  it("replaces an earlier run's summary", async () => {
    const s = join(dir.path, 'earlier.json');
    writeFileSync(s, JSON.stringify({ command: 'hash', outcome: 'completed' }));
    const r = await runCli(['hash', join(dir.path, 'gone.csv'), '--summary-json', s]);
    expect(r.code).not.toBe(0);
    expect(summaryAt(s)).toMatchObject({ command: 'hash', outcome: 'failed', exit_code: r.code });
  });
});
