// UID2_BATCH_BENCH_REPORT: a map run writes its threads' CPU, GC time and request window to the named file, and
// leaves nothing else behind; without the variable, no file and the same output bytes.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import { emailRows, tempDir } from '../helpers/map-e2e-data.js';
import { runCli, serveConnection, startServe, type ServeProcess } from '../helpers/map-e2e-processes.js';

const dir = tempDir('bench-report');
let serve: ServeProcess;

beforeAll(async () => {
  ensureBuilt();
  serve = await startServe();
}, 120_000);

afterAll(async () => {
  await serve?.stop();
  dir.remove();
});

describe('UID2_BATCH_BENCH_REPORT', () => {
  it('writes per-thread CPU, GC and the request window; the output is the same bytes as without it', async () => {
    const input = dir.file('in.csv', emailRows(3000));
    const connection = serveConnection(serve);
    const run = (out: string, env: Record<string, string>) =>
      runCli(['map', input, '-o', out, '--threads', '2', '--batch-size', '100', '--quiet', ...connection.args], {
        env: { ...connection.env, ...env },
      });
    const report = dir.file('report.json');
    const withReport = await run(dir.file('with.csv'), { UID2_BATCH_BENCH_REPORT: report });
    expect(withReport.code).toBe(0);
    const without = await run(dir.file('without.csv'), {});
    expect(without.code).toBe(0);
    expect(withReport.stderr).toBe(without.stderr);
    expect(readFileSync(dir.file('with.csv'))).toEqual(readFileSync(dir.file('without.csv')));

    const r = JSON.parse(readFileSync(report, 'utf8'));
    expect(r.cpu_source).toMatch(/threadCpuUsage|thread-self/);
    expect(r.process_cpu_us).toBeGreaterThan(0);
    expect(r.main.cpu_us).toBeGreaterThan(0);
    expect(r.main.cpu_us).toBeLessThanOrEqual(r.process_cpu_us);
    expect(r.main.gc_count).toBeGreaterThan(0);
    expect(r.threads).toHaveLength(2);
    for (const t of r.threads) {
      expect(t.thread).toBeGreaterThan(0);
      expect(Number.isFinite(t.cpu_us)).toBe(true);
      expect(Number.isFinite(t.gc_ms)).toBe(true);
    }
    // 2,940 distinct valid addresses in batches of 100
    expect(r.window.requests).toBe(30);
    expect(r.window.max_in_flight).toBeGreaterThan(0);
    expect(r.window.max_in_flight).toBeLessThanOrEqual(20);
    expect(r.window.mean_in_flight).toBeGreaterThan(0);
    // the threads' own files are gathered into the report and removed; a run without the variable writes none
    expect(readdirSync(dir.path).filter((n) => n.includes('.thread-'))).toEqual([]);
    expect(existsSync(dir.file('report.json.thread-1'))).toBe(false);
  }, 60_000);
});
