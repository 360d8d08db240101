import { describe, expect, it } from 'vitest';
import { sha256Base64 } from '../../src/identity/index.js';
import { MapEngine, type MapEngineOptions } from '../../src/pipeline/map/map-engine.js';
import { outputRows } from '../../src/pipeline/map/result-columns.js';
import { chunked, FakeMapper, FakeState, NOW_S, seeded } from './engine-fakes.js';

const COLUMNS = [{ name: 'email', index: 1, kind: 'email' as const }];

function emails(n: number): string[][] {
  return Array.from({ length: n }, (_, i) => [String(i), `user${i}@example.com`]);
}

async function run(rows: string[][], options: Partial<MapEngineOptions> & { mapper: FakeMapper }) {
  const out: string[][] = [];
  const engine = new MapEngine({
    columns: COLUMNS,
    mapBatch: options.mapper.mapBatch,
    nowS: () => NOW_S,
    ...options,
    onChunk: (chunk) => void out.push(...outputRows(chunk, null)),
  });
  const result = await engine.run(chunked(rows, 50));
  return { result, out };
}

describe('MapEngine with the state file', () => {
  it('answers fresh mappings and tombstones from the state, and re-sends due ones', async () => {
    const state = new FakeState();
    const h = (i: number) => sha256Base64(`user${i}@example.com`);
    state.put('email', h(0), { status: 'mapped', u: 'U0', p: 'P0', r: NOW_S + 10 });
    state.put('email', h(1), { status: 'mapped', u: 'U1', p: null, r: NOW_S });
    state.put('email', h(2), { status: 'optout', u: null, p: null, r: null });
    state.put('email', h(3), { status: 'invalid', u: null, p: null, r: null });
    const mapper = new FakeMapper();
    const rows = emails(5);
    rows.push(['5', 'user0@example.com']);
    const { result, out } = await run(rows, { mapper, state });
    expect(out.map((r) => r.slice(2))).toEqual([
      ['U0', 'P0', String(NOW_S + 10), 'mapped', ''],
      [expect.any(String), '', String(NOW_S + 86_400), 'mapped', ''],
      ['', '', '', 'optout', 'optout'],
      ['', '', '', 'invalid', 'invalid identifier'],
      [expect.any(String), '', String(NOW_S + 86_400), 'mapped', ''],
      ['U0', 'P0', String(NOW_S + 10), 'mapped', ''],
    ]);
    // due (now >= r) and unknown entries are sent; the rest is not
    expect(mapper.requests).toEqual([{ email_hash: [h(1), h(4)] }]);
    expect(result.counts.fromState).toBe(4);
    expect(state.commits).toBe(1);
    expect(state.entries.get(`email:${h(1)}`)).toMatchObject({ status: 'mapped', r: NOW_S + 86_400 });
  });

  it('commits each answered batch once, and never a failed one', async () => {
    const state = new FakeState();
    const mapper = new FakeMapper({ failOn: (call) => (call === 3 ? new Error('socket hang up') : undefined) });
    const { result } = await run(emails(1_000), { mapper, state, batchSize: 100, concurrency: 1 });
    expect(result.counts.batchesCommitted).toBe(9);
    expect(state.commits).toBe(9);
    expect(state.entries.size).toBe(900);
    expect(state.entries.has(`email:${sha256Base64('user250@example.com')}`)).toBe(false);
  });

  it('resumes an interrupted run: the re-run sends only what was not committed, and the output matches', async () => {
    const rows = emails(4_000);
    const random = seeded(11);

    const undisturbed = await run(rows, { mapper: new FakeMapper(), batchSize: 100 });

    const state = new FakeState();
    const stop = new AbortController();
    const first = new FakeMapper({
      latency: () => 1 + Math.floor(random() * 4),
      onStart: (_inFlight, call) => {
        if (call === 12) stop.abort();
      },
    });
    const interrupted = await run(rows, { mapper: first, state, batchSize: 100, concurrency: 4, signal: stop.signal });
    expect(interrupted.result.outcome.kind).toBe('interrupted');
    // every batch that had started finished within the grace period and was committed
    expect(state.commits).toBe(first.requests.length);
    expect(state.entries.size).toBe(first.itemsSent);
    expect(first.itemsSent).toBeLessThan(4_000);

    const second = new FakeMapper({ latency: () => 1 + Math.floor(random() * 4) });
    const resumed = await run(rows, { mapper: second, state, batchSize: 100, concurrency: 4 });
    expect(resumed.result.outcome.kind).toBe('completed');
    expect(second.itemsSent).toBe(4_000 - first.itemsSent);
    expect(resumed.result.counts.fromState).toBe(first.itemsSent);
    expect(resumed.out).toEqual(undisturbed.out);
  });

  it('gives in-flight requests only the grace period after an interrupt', async () => {
    const stop = new AbortController();
    const mapper = new FakeMapper({ latency: () => 60_000, onStart: () => stop.abort() });
    const started = Date.now();
    const { result } = await run(emails(500), { mapper, batchSize: 100, signal: stop.signal, graceMs: 50 });
    expect(result.outcome.kind).toBe('interrupted');
    expect(mapper.requests).toHaveLength(0);
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});
