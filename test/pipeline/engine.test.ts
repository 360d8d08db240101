import { describe, expect, it } from 'vitest';
import { sha256Base64 } from '../../src/identity/index.js';
import { MapEngine, type EngineColumn, type MapEngineOptions } from '../../src/pipeline/map/map-engine.js';
import { outputHeader, outputRows } from '../../src/pipeline/map/result-columns.js';
import { MAX_REQUEST_JSON_BYTES } from '../../src/pipeline/map/batcher.js';
import { RateLimitedError, UnauthorizedError } from '../../src/protocol/index.js';
import type { RowProblem } from '../../src/pipeline/io/table.js';
import { chunked, FakeMapper, NOW_S, rawUidOf, seeded } from './engine-fakes.js';

const EMAIL: EngineColumn = { name: 'email', index: 1, kind: 'email' };

function emails(n: number, distinct = n): string[][] {
  return Array.from({ length: n }, (_, i) => [String(i), `user${i % distinct}@example.com`]);
}

async function run(
  rows: string[][],
  options: Partial<MapEngineOptions> & { mapper?: FakeMapper; chunkRows?: number } = {},
) {
  const mapper = options.mapper ?? new FakeMapper();
  const out: string[][] = [];
  const rejects: string[][] = [];
  const engine = new MapEngine({
    columns: [EMAIL],
    mapBatch: mapper.mapBatch,
    nowS: () => NOW_S,
    ...options,
    onChunk: (chunk) => {
      out.push(...outputRows(chunk, rejects));
    },
  });
  const result = await engine.run(chunked(rows, options.chunkRows ?? 100));
  return { result, out, rejects, mapper, engine };
}

describe('MapEngine: order, dedupe, batches', () => {
  it('keeps input order when batches are answered out of order', async () => {
    const random = seeded(7);
    const rows = emails(3_000);
    const mapper = new FakeMapper({ latency: () => Math.floor(random() * 15) });
    const { result, out } = await run(rows, { mapper, batchSize: 97, concurrency: 8, chunkRows: 37 });
    expect(result.outcome).toEqual({ kind: 'completed' });
    expect(out.map((r) => r[0])).toEqual(rows.map((r) => r[0]));
    for (const row of out) {
      expect(row[2]).toBe(rawUidOf('email', sha256Base64(row[1])));
      expect(row.slice(3)).toEqual(['', String(NOW_S + 86_400), 'mapped', '']);
    }
    expect(mapper.requests.length).toBe(Math.ceil(3_000 / 97));
  });

  it('sends each distinct identifier once, and answers every repeat', async () => {
    const rows = emails(2_000, 150);
    // spelled differently, normalized the same: gmail dots and +tags, case
    rows.push(['x1', 'J.Doe+news@Gmail.com'], ['x2', 'jdoe@gmail.com'], ['x3', ' JDOE@gmail.com']);
    const { result, out, mapper } = await run(rows, { batchSize: 40 });
    expect(mapper.itemsSent).toBe(151);
    expect(result.counts.uniqueIdentifiers).toBe(151);
    expect(result.counts.deduplicated).toBe(2_003 - 151);
    expect(out).toHaveLength(2_003);
    const jdoe = rawUidOf('email', sha256Base64('jdoe@gmail.com'));
    expect(out.slice(-3).map((r) => r[2])).toEqual([jdoe, jdoe, jdoe]);
    expect(out[150][2]).toBe(out[0][2]);
  });

  it('never puts more than --batch-size items or the byte cap in one request, and mixes kinds', async () => {
    const rows = Array.from({ length: 1_000 }, (_, i) => [`user${i}@example.com`, `+1555${String(1_000_000 + i)}`]);
    const columns: EngineColumn[] = [
      { name: 'email', index: 0, kind: 'email' },
      { name: 'phone', index: 1, kind: 'phone' },
    ];
    const small = await run(rows, { columns, batchSize: 64 });
    expect(
      Math.max(...small.mapper.requests.map((r) => (r.email_hash?.length ?? 0) + (r.phone_hash?.length ?? 0))),
    ).toBe(64);
    expect(small.mapper.requests.some((r) => (r.email_hash?.length ?? 0) > 0 && (r.phone_hash?.length ?? 0) > 0)).toBe(
      true,
    );
    expect(small.mapper.itemsSent).toBe(2_000);

    const capped = await run(rows, { columns, maxJsonBytes: 1_000 });
    for (const request of capped.mapper.requests)
      expect(Buffer.byteLength(JSON.stringify(request))).toBeLessThanOrEqual(1_000);
    // 1,000 bytes hold (1000 - 33) / 47 = 20 hashes
    expect(capped.mapper.requests.length).toBe(100);
    expect(capped.out.map((r) => r[5])).toEqual(Array(1_000).fill('mapped'));
    expect(capped.out.map((r) => r[10])).toEqual(Array(1_000).fill('mapped'));
  });

  it('keeps full 5,000-item batches under the 1 MB body limit in text mode', () => {
    expect(33 + 5_000 * 47).toBeLessThan(MAX_REQUEST_JSON_BYTES);
    // envelope (45 bytes) base64-encoded must stay under 1 MiB
    expect(Math.ceil(((MAX_REQUEST_JSON_BYTES + 45) * 4) / 3)).toBeLessThanOrEqual(1 << 20);
  });

  it('answers locally invalid cells without a request, and reports optout and service-invalid', async () => {
    const rows = [
      ['1', 'good@example.com'],
      ['2', 'not-an-email'],
      ['3', ''],
      ['4', 'optout@example.com'],
    ];
    const hashRows = [['5', `AAAA${'B'.repeat(39)}=`]];
    const columns: EngineColumn[] = [{ name: 'id', index: 1, kind: 'auto', hashType: 'email' }];
    const { out, result, mapper } = await run([...rows, ...hashRows], { columns });
    expect(out.map((r) => [r[0], r[5], r[6]])).toEqual([
      ['1', 'mapped', ''],
      ['2', 'invalid', 'unrecognized identifier: not an email, an E.164 phone or a hash'],
      ['3', 'missing', 'empty'],
      ['4', 'optout', 'optout'],
      ['5', 'invalid', 'invalid identifier'],
    ]);
    expect(mapper.itemsSent).toBe(3);
    expect(result.counts.status).toEqual({ mapped: 1, optout: 1, invalid: 2, error: 0, missing: 1 });
    expect(result.counts.invalidByReason).toEqual({
      'unrecognized identifier: not an email, an E.164 phone or a hash': 1,
    });
  });

  it('marks every identifier of a row whose columns are shifted as invalid, and pads nothing itself', async () => {
    const problems = new Map<number, RowProblem>([[1, { kind: 'long_row', cells: 3, expected: 2 }]]);
    const mapper = new FakeMapper();
    const out: string[][] = [];
    const engine = new MapEngine({
      columns: [EMAIL],
      mapBatch: mapper.mapBatch,
      onChunk: (c) => void out.push(...outputRows(c, null)),
    });
    problems.set(2, { kind: 'short_row', cells: 1, expected: 2 });
    problems.set(3, { kind: 'short_row', cells: 2, expected: 3 });
    await engine.run(
      chunked(
        [
          ['1', 'a@example.com'],
          ['2', 'b@example.com'],
          ['3', ''],
          ['4', 'd@example.com'],
        ],
        10,
        problems,
      ),
    );
    expect(out.map((r) => r[5])).toEqual(['mapped', 'invalid', 'invalid', 'mapped']);
    expect(out[1][6]).toContain('unquoted delimiter');
    expect(out[2][6]).toBe('row has 1 cells, header has 2');
    expect(mapper.itemsSent).toBe(2);
  });

  it('handles an empty input', async () => {
    const { result, out, mapper } = await run([]);
    expect(result.outcome.kind).toBe('completed');
    expect(out).toEqual([]);
    expect(mapper.requests).toEqual([]);
    expect(result.counts.rowsDone).toBe(0);
  });

  it('names result columns per identifier column when there are several', () => {
    expect(outputHeader(['id', 'email'], [EMAIL])).toEqual([
      'id',
      'email',
      'raw_uid',
      'prev_raw_uid',
      'refresh_from',
      'status',
      'reason',
    ]);
    expect(outputHeader(['e', 'p'], [{ name: 'e' }, { name: 'p' }]).slice(2)).toEqual([
      'e_raw_uid',
      'e_prev_raw_uid',
      'e_refresh_from',
      'e_status',
      'e_reason',
      'p_raw_uid',
      'p_prev_raw_uid',
      'p_refresh_from',
      'p_status',
      'p_reason',
    ]);
  });

  it('counts what a dry run would send, without sending', async () => {
    const rows = emails(1_050, 1_000);
    rows.push(['bad', 'nope']);
    const engine = new MapEngine({ columns: [EMAIL], dryRun: true, batchSize: 100 });
    const result = await engine.run(chunked(rows, 64));
    expect(result.counts).toMatchObject({
      rowsRead: 1_051,
      valid: 1_050,
      uniqueIdentifiers: 1_000,
      batches: 10,
      itemsInBatches: 1_000,
    });
    expect(result.counts.invalidByReason).toEqual({ 'invalid email': 1 });
  });
});

describe('MapEngine: failures', () => {
  it('gives the rows of a batch that failed after its last attempt status error, and goes on', async () => {
    const mapper = new FakeMapper({
      failOn: (call) =>
        call === 2 ? new RateLimitedError(429, 'rate_limited', undefined, 'rate limited (HTTP 429)') : undefined,
    });
    const { result, out, rejects } = await run(emails(500), { mapper, batchSize: 100, concurrency: 1, maxAttempts: 6 });
    expect(result.outcome.kind).toBe('completed');
    expect(result.counts.batchesFailed).toBe(1);
    expect(result.counts.status).toEqual({ mapped: 400, optout: 0, invalid: 0, error: 100, missing: 0 });
    const failed = out.filter((r) => r[5] === 'error');
    expect(failed.map((r) => r[0])).toEqual(Array.from({ length: 100 }, (_, i) => String(100 + i)));
    expect(failed[0][6]).toBe('rate limited (HTTP 429) after 6 attempts');
    expect(rejects).toHaveLength(100);
    expect(out.map((r) => r[0])).toEqual(Array.from({ length: 500 }, (_, i) => String(i)));
  });

  it('stops at the first failed batch with --fail-fast', async () => {
    const mapper = new FakeMapper({
      failOn: (call) => (call === 1 ? new Error('connection reset') : undefined),
      latency: () => 5,
    });
    const { result, mapper: m } = await run(emails(5_000), { mapper, batchSize: 100, concurrency: 2, failFast: true });
    expect(result.outcome.kind).toBe('failed');
    expect(m.requests.length).toBeLessThan(10);
  });

  it('stops at once on 401', async () => {
    const mapper = new FakeMapper({
      failOn: () => new UnauthorizedError(401, 'unauthorized', 'Unauthorized'),
      latency: () => 2,
    });
    const { result } = await run(emails(5_000), { mapper, batchSize: 100, concurrency: 4 });
    expect(result.outcome.kind).toBe('auth-refused');
    expect(result.counts.rowsDone).toBe(0);
  });

  it('ends with the source error, stopping what is in flight', async () => {
    async function* broken() {
      yield* chunked(emails(10), 10);
      throw new Error('input.csv:12: unbalanced quote');
    }
    const mapper = new FakeMapper({ latency: () => 20 });
    const engine = new MapEngine({ columns: [EMAIL], mapBatch: mapper.mapBatch });
    const result = await engine.run(broken());
    expect(result.outcome).toMatchObject({ kind: 'failed', error: { message: 'input.csv:12: unbalanced quote' } });
  });
});

describe('MapEngine: empty identifier cells', () => {
  it('reports an empty cell as missing (not invalid), sends nothing for it and keeps it out of the rejects', async () => {
    const rows = [
      ['1', 'a@example.com'],
      ['2', ''],
      ['3', 'not-an-email'],
    ];
    const { result, out, rejects, mapper } = await run(rows);
    expect(mapper.itemsSent).toBe(1);
    expect(out[1].slice(2)).toEqual(['', '', '', 'missing', 'empty']);
    expect(out[2][5]).toBe('invalid');
    expect(result.counts.status).toEqual({ mapped: 1, optout: 0, invalid: 1, error: 0, missing: 1 });
    expect(rejects.map((r) => r[0])).toEqual(['3']);
  });
});
