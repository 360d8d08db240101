import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Base64 } from '../../src/identity/index.js';
import { isMappedV3 } from '../../src/protocol/index.js';
import { startCountingProxy, type CountingProxy } from '../helpers/counting-proxy.js';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import { optOut, runCli, setServiceTime, startServe, testClient, type Served } from '../helpers/remap-e2e.js';

const N = 12_000;
const OPTED_OUT = [17, 4_999, 5_000, 11_998];
const sinceMs = (i: number): number => Date.UTC(2025, 11, 20, 10, 0, 0) + i * 1000;
const STATUS_PATH = '/v2/optout/status';

let dir: string;
let served: Served;
let proxy: CountingProxy;
let rawUids: string[];
let inputCsv: string;

beforeAll(async () => {
  ensureBuilt();
  dir = mkdtempSync(join(tmpdir(), 'uid2-optout-e2e-'));
  // every answer takes 100 ms, so requests that overlapped would be seen overlapping
  served = await startServe(['--latency-ms', '100']);
  // a known identity date, after every since_ms below; envelopes stay on the real clock
  await setServiceTime(served.url, '2026-01-01T00:00:00Z');
  proxy = await startCountingProxy(served.url);
  const client = testClient(served);
  const hashes = Array.from({ length: N }, (_, i) => sha256Base64(`person${i}@example.com`));
  rawUids = [];
  for (let i = 0; i < N; i += 5000) {
    const body = await client.mapV3({ email_hash: hashes.slice(i, i + 5000) });
    for (const item of body.email_hash) {
      if (!isMappedV3(item)) throw new Error('every test identity should map');
      rawUids.push(item.u);
    }
  }
  await client.close();
  for (const i of OPTED_OUT) await optOut(served.url, { email_hash: hashes[i], since_ms: sinceMs(i) });
  const lines = ['customer_id,raw_uid', ...rawUids.map((u, i) => `c${i},${u}`), 'bad1,not-a-raw-uid', 'bad2,'];
  inputCsv = join(dir, 'ids.csv');
  writeFileSync(inputCsv, `${lines.join('\n')}\n`);
}, 120_000);

afterAll(async () => {
  await proxy?.close();
  await served?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function readCsv(path: string): Record<string, string>[] {
  return parse(readFileSync(path, 'utf8'), { columns: true }) as Record<string, string>[];
}

describe('optout-check (built CLI against serve)', () => {
  it('reports exactly the opted-out raw UIDs with their times, one request at a time on one connection', async () => {
    const out = join(dir, 'checked.csv');
    const before = proxy.requests(STATUS_PATH);
    const run = await runCli(['optout-check', inputCsv, '-o', out, '--summary-json', join(dir, 'summary.json')], {
      served,
      env: { UID2_BASE_URL: proxy.url },
    });
    expect(run.stderr).toMatch(/optout-check: 12,002 rows/);
    expect(run.code, run.stderr).toBe(0);
    const rows = readCsv(out);
    expect(rows.length).toBe(N + 2);
    expect(Object.keys(rows[0])).toEqual(['customer_id', 'raw_uid', 'opted_out', 'opted_out_since', 'reason']);
    const opted = rows.filter((r) => r.opted_out === 'true');
    expect(opted.map((r) => r.customer_id)).toEqual(OPTED_OUT.map((i) => `c${i}`));
    for (const r of opted)
      expect(r.opted_out_since).toBe(String(Math.floor(sinceMs(Number(r.customer_id.slice(1))) / 1000)));
    expect(rows.filter((r) => r.opted_out === 'false').length).toBe(N - OPTED_OUT.length);
    expect(rows.slice(-2).map((r) => [r.opted_out, r.reason !== ''])).toEqual([
      ['', true],
      ['', true],
    ]);
    // the public service's rule, measured outside the CLI: three batches, never two at once, one socket
    expect(proxy.requests(STATUS_PATH) - before).toBe(3);
    expect(proxy.peakInFlight(STATUS_PATH)).toBe(1);
    expect(proxy.connections(STATUS_PATH)).toBe(1);
    const summary = JSON.parse(readFileSync(join(dir, 'summary.json'), 'utf8')) as Record<string, unknown>;
    expect(summary).toMatchObject({
      command: 'optout-check',
      rows: N + 2,
      opted_out: 4,
      not_opted_out: N - 4,
      requests: 3,
    });
  });

  it('--private-operator --concurrency 3 sends batches in parallel, with the same answers in input order', async () => {
    const parallel = await startCountingProxy(served.url);
    try {
      const out = join(dir, 'parallel.jsonl');
      const run = await runCli(
        ['optout-check', inputCsv, '-o', out, '--format', 'jsonl', '--private-operator', '--concurrency', '3', '-q'],
        {
          served,
          env: { UID2_BASE_URL: parallel.url },
        },
      );
      expect(run.code, run.stderr).toBe(0);
      expect(parallel.peakInFlight(STATUS_PATH)).toBeGreaterThan(1);
      expect(parallel.peakInFlight(STATUS_PATH)).toBeLessThanOrEqual(3);
      const rows = readFileSync(out, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(rows.map((r) => r.customer_id)).toEqual([...rawUids.map((_, i) => `c${i}`), 'bad1', 'bad2']);
      // typed as map's output is: a boolean, a number of seconds, null where there is no value
      expect(rows.filter((r) => r.opted_out === true).map((r) => r.customer_id)).toEqual(OPTED_OUT.map((i) => `c${i}`));
      expect(rows.filter((r) => r.opted_out === true).map((r) => r.opted_out_since)).toEqual(
        OPTED_OUT.map((i) => Math.floor(sinceMs(i) / 1000)),
      );
      expect(rows[0]).toMatchObject({ opted_out: false, opted_out_since: null, reason: null });
      expect(rows.at(-1)).toMatchObject({ opted_out: null, opted_out_since: null, reason: expect.any(String) });
    } finally {
      await parallel.close();
    }
  });

  it('--only-opted-out writes just those rows', async () => {
    const out = join(dir, 'only.csv');
    const run = await runCli(['optout-check', inputCsv, '-o', out, '--only-opted-out', '--col', 'raw_uid', '-q'], {
      served,
    });
    expect(run.code, run.stderr).toBe(0);
    expect(readCsv(out).map((r) => r.raw_uid)).toEqual(OPTED_OUT.map((i) => rawUids[i]));
  });

  it('--col repeats: every column named is checked, each with its own verdict columns', async () => {
    const two = join(dir, 'two-columns.csv');
    // an email column and a phone column of raw UIDs: the opted-out ones sit in either
    const lines = [
      'id,email_raw_uid,phone_raw_uid',
      ...Array.from(
        { length: 300 },
        (_, i) => `r${i},${rawUids[i + 1_000]},${rawUids[i === 7 ? OPTED_OUT[0] : i + 2_000]}`,
      ),
    ];
    lines.push(`r300,${rawUids[OPTED_OUT[1]]},${rawUids[3_000]}`);
    writeFileSync(two, `${lines.join('\n')}\n`);
    const out = join(dir, 'two-checked.csv');
    const run = await runCli(['optout-check', two, '--col', 'email_raw_uid', '--col', 'phone_raw_uid', '-o', out], {
      served,
    });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toMatch(/optout-check: 301 rows/);
    const rows = readCsv(out);
    expect(Object.keys(rows[0])).toEqual([
      'id',
      'email_raw_uid',
      'phone_raw_uid',
      'email_raw_uid_opted_out',
      'email_raw_uid_opted_out_since',
      'email_raw_uid_reason',
      'phone_raw_uid_opted_out',
      'phone_raw_uid_opted_out_since',
      'phone_raw_uid_reason',
    ]);
    expect(rows.map((r) => r.id)).toEqual(Array.from({ length: 301 }, (_, i) => `r${i}`));
    expect(rows.filter((r) => r.phone_raw_uid_opted_out === 'true').map((r) => r.id)).toEqual(['r7']);
    expect(rows.filter((r) => r.email_raw_uid_opted_out === 'true').map((r) => r.id)).toEqual(['r300']);
    const only = join(dir, 'two-only.csv');
    const onlyRun = await runCli(
      ['optout-check', two, '--col', 'email_raw_uid', '--col', 'phone_raw_uid', '--only-opted-out', '-o', only, '-q'],
      { served },
    );
    expect(onlyRun.code, onlyRun.stderr).toBe(0);
    expect(readCsv(only).map((r) => r.id)).toEqual(['r7', 'r300']);
  });

  it('refuses a flag that takes one value given twice, before reading', async () => {
    const run = await runCli(['optout-check', inputCsv, '--format', 'csv', '--format', 'jsonl'], { served });
    expect(run.code, run.stderr).toBe(2);
    expect(run.stderr).toBe(
      "uid2-batch: --format was given twice ('csv', then 'jsonl'); it takes one value: give it once\n",
    );
  });

  it('takes the input format options: a Latin-1 file without a header, the hint of the invalid-UTF-8 message works', async () => {
    const latin1 = join(dir, 'latin1.csv');
    // a Latin-1 byte (0xE9) in a comment column: invalid UTF-8, fine as latin1
    writeFileSync(
      latin1,
      Buffer.concat([Buffer.from(`${rawUids[OPTED_OUT[0]]},caf`), Buffer.of(0xe9), Buffer.from('\n')]),
    );
    const refused = await runCli(['optout-check', latin1, '--no-header', '--col', 'col1', '-q'], { served });
    expect(refused.code, refused.stderr).not.toBe(0);
    expect(refused.stderr).toMatch(/--encoding latin1/);
    const out = join(dir, 'latin1.out.csv');
    const run = await runCli(
      ['optout-check', latin1, '--no-header', '--col', 'col1', '--encoding', 'latin1', '-o', out, '-q'],
      { served },
    );
    expect(run.code, run.stderr).toBe(0);
    expect(readCsv(out).map((r) => [r.col1, r.col2, r.opted_out])).toEqual([
      [rawUids[OPTED_OUT[0]], 'caf\u00e9', 'true'],
    ]);
  });

  it('refuses --concurrency without --private-operator, and says why', async () => {
    const run = await runCli(['optout-check', inputCsv, '--concurrency', '4'], { served });
    expect(run.code, run.stderr).toBe(2);
    expect(run.stderr).toMatch(/--concurrency needs --private-operator/);
    expect(run.stderr).not.toMatch(/\n\s+at /);
  });

  it('names the columns when no raw UID column can be found', async () => {
    const odd = join(dir, 'odd.csv');
    writeFileSync(odd, `a,b\n${rawUids[0]},x\n`);
    const run = await runCli(['optout-check', odd], { served });
    expect(run.code, run.stderr).toBe(2);
    expect(run.stderr).toMatch(/no column named like a raw UID .* 'a', 'b'.*--col/);
  });
});
