import { mkdtemp, readFile, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  formatDuration,
  formatSummary,
  makeSummary,
  printSummary,
  writeSummaryJson,
} from '../../src/pipeline/run/summary.js';

const example = () =>
  makeSummary({
    command: 'map',
    rows: 10_000,
    status: { mapped: 9_500, optout: 200, invalid: 290, error: 10 },
    unique_identifiers: 9_800,
    from_state: 500,
    requests: 3,
    retries: 0,
    http_429: 0,
    startedMs: 1_000,
    endedMs: 2_200,
  });

describe('run summary', () => {
  it('computes duration and throughput', () => {
    const s = example();
    expect(s.duration_s).toBe(1.2);
    expect(s.rows_per_s).toBe(8_333);
    expect(s.status).toEqual({ mapped: 9_500, optout: 200, invalid: 290, error: 10 });
  });

  it('fills missing counters with zeros and keeps extra fields', () => {
    const s = makeSummary({ command: 'remap-due', rows: 0, startedMs: 5, endedMs: 5, extra: { due: 0 } });
    expect(s).toEqual({
      command: 'remap-due',
      rows: 0,
      status: { mapped: 0, optout: 0, invalid: 0, error: 0 },
      unique_identifiers: 0,
      from_state: 0,
      requests: 0,
      retries: 0,
      http_429: 0,
      duration_s: 0,
      rows_per_s: 0,
      due: 0,
    });
  });

  it('counts empty identifier cells as missing, and says one request and one retry in the singular', () => {
    const s = makeSummary({
      command: 'map',
      rows: 4,
      status: { mapped: 2, optout: 0, invalid: 1, error: 0, missing: 1 },
      requests: 1,
      retries: 1,
      http_429: 1,
      startedMs: 0,
      endedMs: 1_000,
    });
    expect(formatSummary(s)).toBe(
      'map: 4 rows in 1 s (4 rows/s): 2 mapped, 0 optout, 1 invalid, 0 error, 1 missing; 1 request, 1 retry, 1 x 429; 0 from state',
    );
  });

  it('prints one cron-friendly line', () => {
    const lines: string[] = [];
    printSummary(example(), { write: (s: string) => lines.push(s) });
    expect(lines).toEqual([
      'map: 10,000 rows in 1.2 s (8,333 rows/s): 9,500 mapped, 200 optout, 290 invalid, 10 error; 3 requests, 0 retries, 0 x 429; 500 from state\n',
    ]);
  });

  it('formats long runs and large counts', () => {
    const s = makeSummary({
      command: 'map',
      rows: 100_000_000,
      status: { mapped: 100_000_000 },
      requests: 20_000,
      retries: 12,
      http_429: 7,
      startedMs: 0,
      endedMs: 1_000_000,
    });
    expect(formatSummary(s)).toBe(
      'map: 100,000,000 rows in 16 min 40 s (100,000 rows/s): 100,000,000 mapped, 0 optout, 0 invalid, 0 error; 20,000 requests, 12 retries, 7 x 429; 0 from state',
    );
    expect(formatDuration(0.04)).toBe('0 s');
    expect(formatDuration(42.4)).toBe('42 s');
    expect(formatDuration(7_530)).toBe('2 h 05 min');
  });
});

describe('writeSummaryJson', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'uid2-summary-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('writes the issue-3 fields as JSON and leaves no temp file', async () => {
    const path = join(dir, 'summary.json');
    await writeSummaryJson(path, { ...example(), batches: 2 });
    const data = JSON.parse(await readFile(path, 'utf8')) as Record<string, unknown>;
    expect(data).toMatchObject({
      rows: 10_000,
      status: { mapped: 9_500, optout: 200, invalid: 290, error: 10 },
      unique_identifiers: 9_800,
      from_state: 500,
      requests: 3,
      retries: 0,
      http_429: 0,
      duration_s: 1.2,
      rows_per_s: 8_333,
      batches: 2,
    });
    expect(await readdir(dir)).toEqual(['summary.json']);
  });

  it('replaces an existing file whole', async () => {
    const path = join(dir, 'again.json');
    await writeSummaryJson(path, { ...example(), note: 'x'.repeat(10_000) });
    await writeSummaryJson(path, example());
    const text = await readFile(path, 'utf8');
    expect(JSON.parse(text)).toEqual(example());
    expect((await stat(path)).size).toBe(Buffer.byteLength(text));
  });

  it('fails in a missing directory without leaving anything behind', async () => {
    await expect(writeSummaryJson(join(dir, 'nope', 's.json'), example())).rejects.toMatchObject({ code: 'ENOENT' });
  });
});
