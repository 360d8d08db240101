import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, ROOT } from '../helpers/map-e2e-build.js';
import { tempDir } from '../helpers/map-e2e-data.js';
import { runCli } from '../helpers/map-e2e-processes.js';
import { parsePrometheusText, sampleValue } from '../helpers/prometheus-text.js';

// --metrics-file: the run's counters for node_exporter's textfile collector, the same figures as the summary,
// renamed into place whole, and written also when the run fails.

const dir = tempDir('metrics-file');
const SAMPLE = join(ROOT, 'samples', 'customers.csv');

beforeAll(() => ensureBuilt(), 120_000);
afterAll(() => dir.remove());

const metricsAt = (path: string) => parsePrometheusText(readFileSync(path, 'utf8'));

describe('--metrics-file', () => {
  it('a completed map: the summary figures, an existing metrics file replaced whole, no temp file left', async () => {
    const sub = join(dir.path, 'ok');
    const m = join(dir.path, 'ok.prom');
    const s = join(dir.path, 'ok.json');
    // a longer file of an earlier run: nothing of it may remain
    writeFileSync(m, `# HELP uid2_batch_stale x\n# TYPE uid2_batch_stale gauge\n${'uid2_batch_stale 1\n'.repeat(500)}`);
    const before = new Set(readdirSync(dir.path));
    const r = await runCli([
      'map',
      SAMPLE,
      '--env',
      'local',
      '-o',
      `${sub}.csv`,
      '--summary-json',
      s,
      '--metrics-file',
      m,
    ]);
    expect(r.code, r.stderr).toBe(0);
    const summary = JSON.parse(readFileSync(s, 'utf8')) as {
      rows: number;
      status: Record<string, number>;
      unique_identifiers: number;
      from_state: number;
      requests: number;
      retries: number;
      http_429: number;
      duration_s: number;
      batches_failed: number;
      bytes_read: number;
      bytes_written: number;
    };
    const file = metricsAt(m);
    const map = { command: 'map' };
    expect(sampleValue(file, 'uid2_batch_stale')).toBeUndefined();
    expect(sampleValue(file, 'uid2_batch_rows_total', map)).toBe(summary.rows);
    expect(summary.rows).toBe(3000);
    for (const [status, n] of Object.entries(summary.status))
      expect(sampleValue(file, 'uid2_batch_identifiers_total', { command: 'map', status }), status).toBe(n);
    expect(sampleValue(file, 'uid2_batch_unique_identifiers_total', map)).toBe(summary.unique_identifiers);
    expect(sampleValue(file, 'uid2_batch_from_state_total', map)).toBe(summary.from_state);
    expect(sampleValue(file, 'uid2_batch_requests_total', map)).toBe(summary.requests);
    expect(sampleValue(file, 'uid2_batch_retries_total', map)).toBe(summary.retries);
    expect(sampleValue(file, 'uid2_batch_http_429_total', map)).toBe(summary.http_429);
    expect(sampleValue(file, 'uid2_batch_failed_batches_total', map)).toBe(summary.batches_failed);
    expect(sampleValue(file, 'uid2_batch_bytes_read_total', map)).toBe(summary.bytes_read);
    expect(summary.bytes_read).toBe(statSync(SAMPLE).size);
    expect(sampleValue(file, 'uid2_batch_bytes_written_total', map)).toBe(summary.bytes_written);
    expect(summary.bytes_written).toBe(statSync(`${sub}.csv`).size);
    expect(sampleValue(file, 'uid2_batch_run_duration_seconds', map)).toBe(summary.duration_s);
    expect(sampleValue(file, 'uid2_batch_exit_code', map)).toBe(0);
    const endedS = sampleValue(file, 'uid2_batch_last_run_timestamp_seconds', map) ?? 0;
    expect(Math.abs(endedS - statSync(m).mtimeMs / 1000)).toBeLessThan(60);
    expect(statSync(m).mode & 0o777).toBe(0o644 & ~process.umask());
    const added = readdirSync(dir.path).filter((name) => !before.has(name));
    expect(added.sort()).toEqual(['ok.csv', 'ok.json']);
  });

  it('a failed run: its exit code, written although the run made no summary', async () => {
    const m = join(dir.path, 'failed.prom');
    const r = await runCli(['map', join(dir.path, 'no-such.csv'), '--env', 'local', '--metrics-file', m]);
    expect(r.code).not.toBe(0);
    const file = metricsAt(m);
    expect(sampleValue(file, 'uid2_batch_exit_code', { command: 'map' })).toBe(r.code);
    expect(sampleValue(file, 'uid2_batch_rows_total')).toBeUndefined();
    expect(sampleValue(file, 'uid2_batch_run_duration_seconds', { command: 'map' })).toBeGreaterThanOrEqual(0);
  });

  it('a path that holds some other file: refused before the run, the file untouched', async () => {
    const m = join(dir.path, 'data.csv');
    writeFileSync(m, 'email\na@example.com\n');
    const r = await runCli(['map', SAMPLE, '--env', 'local', '-o', join(dir.path, 'x.csv'), '--metrics-file', m]);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toEqual([
      `uid2-batch: --metrics-file ${m} exists and is not a metrics file of this tool: name a new file (e.g. uid2_batch.prom) or remove it`,
    ]);
    expect(readFileSync(m, 'utf8')).toBe('email\na@example.com\n');
  });
});

describe("--metrics-file among the run's other files", () => {
  it('the same file as -o: refused before the run, nothing written', async () => {
    const m = join(dir.path, 'both.prom');
    const r = await runCli(['map', SAMPLE, '--env', 'local', '-o', m, '--metrics-file', m]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`--metrics-file '${m}' is the same file as -o '${m}'`);
    expect(readdirSync(dir.path)).not.toContain('both.prom');
  });

  it('in a directory that does not exist: refused before the run', async () => {
    const m = join(dir.path, 'no-such-dir', 'm.prom');
    const r = await runCli([
      'optout-check',
      join(ROOT, 'samples', 'raw-uids.csv'),
      '--env',
      'local',
      '--metrics-file',
      m,
    ]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--metrics-file .*: the directory .* does not exist/);
  });
});
