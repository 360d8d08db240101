import { describe, expect, it } from 'vitest';
import { ServerError } from '../../src/protocol/index.js';
import { sweepStateOptouts, type SweptRawUid } from '../../src/pipeline/optout/optout-sweep.js';
import { FakeOptoutService, FakeSweepState, rawUid } from './optout-fakes.js';

const NOW_S = 1_800_000_000;
const SINCE = 1_790_000_000_000;

/** n entries with a u each, every third also with a p; ids 1..n. */
function stateOf(n: number, lastCheck: (i: number) => number | null = () => null): FakeSweepState {
  const state = new FakeSweepState();
  for (let i = 0; i < n; i++) state.add(rawUid(i), i % 3 === 0 ? rawUid(100_000 + i) : null, lastCheck(i));
  return state;
}

function ids(from: number, to: number): number[] {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i);
}

describe('sweepStateOptouts', () => {
  it('checks u and p of every entry, tombstones entries whose u or p opted out, records every check', async () => {
    const state = stateOf(300);
    state.add(null, null);
    const optedOut = new Map([
      [rawUid(5), SINCE],
      // only the previous raw UID of entry 10 (index 9) opted out: the identity did, before its UID rotated
      [rawUid(100_009), SINCE + 1000],
    ]);
    const service = new FakeOptoutService(optedOut);
    const rows: SweptRawUid[] = [];
    const result = await sweepStateOptouts({
      state,
      nowS: NOW_S,
      check: service.check,
      batchSize: 70,
      onChecked: (r) => void rows.push(...r),
    });

    expect(result.outcome).toEqual({ kind: 'completed' });
    const expected = 300 + 100;
    expect(service.sent.length).toBe(expected);
    expect(new Set(service.sent).size).toBe(expected);
    expect(service.calls.every((c) => c.length <= 70)).toBe(true);
    expect(rows.length).toBe(expected);
    expect(rows.filter((r) => r.verdict.kind === 'opted_out').map((r) => [r.entry.id, r.which])).toEqual([
      [6, 'u'],
      [10, 'p'],
    ]);
    expect(state.entries[5]).toMatchObject({ status: 'optout', u: null, p: null, optedOutSinceMs: SINCE });
    expect(state.entries[9]).toMatchObject({ status: 'optout', u: null, p: null, optedOutSinceMs: SINCE + 1000 });
    expect(state.entries.filter((e) => e.status === 'optout').length).toBe(2);
    // tombstoning reads only the rows of the batch
    for (const call of state.tombstoneCalls) expect(call.within?.length).toBeGreaterThan(0);
    expect(state.entries.slice(0, 300).every((e) => e.lastOptoutCheckS === NOW_S)).toBe(true);
    expect(result.counts).toMatchObject({ planned: 300, entries: 300, tombstoned: 2, rows: expected, sent: expected });
    expect(result.counts.status).toEqual({
      opted_out: 2,
      not_opted_out: expected - 2,
      invalid: 0,
      missing: 0,
      error: 0,
    });
  });

  it('--sweep-fraction checks ceil(F * entries) per run in id order from the saved cursor, wrapping at the end', async () => {
    const state = stateOf(1_001, (i) => (i < 500 ? 1_000 + i : null));
    const service = new FakeOptoutService(new Map());
    const first = await sweepStateOptouts({ state, nowS: NOW_S, check: service.check, fraction: 0.05 });
    expect(first.counts.planned).toBe(51);
    expect(first.counts.entries).toBe(51);
    // from the first entry on, whenever the entries were checked
    expect(state.recorded.flat()).toEqual(ids(1, 51));
    expect(state.cursor).toBe(51);

    for (let run = 0; run < 40; run++)
      await sweepStateOptouts({ state, nowS: NOW_S + (run + 1) * 86_400, check: service.check, fraction: 0.05 });
    // 41 runs of 51: every entry once per cycle of 1,001, in id order, the second cycle after the first
    const order = state.recorded.flat();
    expect(order.length).toBe(41 * 51);
    expect(order.slice(0, 1_001)).toEqual(ids(1, 1_001));
    expect(order.slice(1_001, 2_002)).toEqual(ids(1, 1_001));
    expect(order.slice(2_002)).toEqual(ids(1, 41 * 51 - 2_002));
    expect(state.cursor).toBe(41 * 51 - 2_002);
    // a run reads after the cursor to the end of the table, then from the first entry up to where it started
    const wrapping = state.selections.filter((s) => s.upTo !== Number.MAX_SAFE_INTEGER);
    expect(wrapping.length).toBeGreaterThan(0);
    expect(wrapping.every((s) => s.after === 0 && s.upTo > 0)).toBe(true);
  });

  it('never checks an entry twice in one run, and skips entries without a raw UID', async () => {
    const state = stateOf(10);
    state.add(null, null);
    state.add(rawUid(11), null);
    state.cursor = 7;
    const service = new FakeOptoutService(new Map());
    const all = await sweepStateOptouts({ state, nowS: NOW_S, check: service.check });
    // 8, 9, 10, 12, then 1..7; entry 11 has no raw UID
    expect(state.recorded.flat()).toEqual([8, 9, 10, 12, 1, 2, 3, 4, 5, 6, 7]);
    expect(all.counts).toMatchObject({ planned: 11, entries: 11 });
    expect(state.cursor).toBe(7);
    // a fraction above what is left after the cursor wraps once, and stops before the cursor's own entries
    state.cursor = 10;
    const most = await sweepStateOptouts({ state, nowS: NOW_S + 1, check: service.check, fraction: 0.99 });
    expect(most.counts.planned).toBe(11);
    expect(state.recorded.slice(-1).flat()).toEqual([12, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(new Set(service.sent).size).toBe(service.sent.length / 2);
  });

  it('keeps the cursor where it was when the run fails after selecting its entries', async () => {
    const state = stateOf(100);
    state.cursor = 40;
    const down = new FakeOptoutService(new Map(), {
      failOn: () => new ServerError(503, 'server_error', undefined),
    });
    const failed = await sweepStateOptouts({ state, nowS: NOW_S, check: down.check, fraction: 0.3 });
    expect(down.calls.length).toBeGreaterThan(0);
    expect(failed.counts.entries).toBe(0);
    expect(state.recorded).toEqual([]);
    expect(state.cursor).toBe(40);
    const next = await sweepStateOptouts({
      state,
      nowS: NOW_S + 1,
      check: new FakeOptoutService(new Map()).check,
      fraction: 0.3,
    });
    expect(next.counts.entries).toBe(30);
    expect(state.recorded.flat()).toEqual(ids(41, 70));
    expect(state.cursor).toBe(70);
  });
  it('one request at a time unless told otherwise', async () => {
    const state = stateOf(600);
    const service = new FakeOptoutService(new Map(), { latencyMs: 2 });
    await sweepStateOptouts({ state, nowS: NOW_S, check: service.check, batchSize: 50 });
    expect(service.calls.length).toBeGreaterThan(10);
    expect(service.peakInFlight).toBe(1);
    const parallel = new FakeOptoutService(new Map(), { latencyMs: 2 });
    await sweepStateOptouts({ state: stateOf(600), nowS: NOW_S, check: parallel.check, batchSize: 50, concurrency: 3 });
    expect(parallel.peakInFlight).toBeGreaterThan(1);
    expect(parallel.peakInFlight).toBeLessThanOrEqual(3);
  });

  it('a failed batch records no check and tombstones nothing: its entries stay first for the next run', async () => {
    const state = stateOf(200);
    const service = new FakeOptoutService(new Map([[rawUid(150), SINCE]]), {
      failOn: (call) => (call >= 3 ? new ServerError(503, 'server_error', undefined) : undefined),
    });
    const rows: SweptRawUid[] = [];
    const result = await sweepStateOptouts({
      state,
      nowS: NOW_S,
      check: service.check,
      batchSize: 50,
      onChecked: (r) => void rows.push(...r),
    });
    const answered = new Set(state.recorded.flat());
    expect(answered.size).toBe(result.counts.entries);
    expect(result.counts.batchesFailed).toBeGreaterThan(0);
    expect(result.counts.status.error).toBeGreaterThan(0);
    expect(rows.filter((r) => r.verdict.kind === 'error').every((r) => !answered.has(r.entry.id))).toBe(true);
    expect(state.entries[150].status).toBe('mapped');
    // the cursor stopped at the last entry answered before the first failure
    expect(state.cursor).toBe(Math.max(...answered));
    const next = await sweepStateOptouts({
      state,
      nowS: NOW_S + 1,
      check: new FakeOptoutService(new Map()).check,
      fraction: 0.1,
    });
    expect(next.counts.entries).toBe(20);
    expect(state.recorded.at(-1)?.every((id) => !answered.has(id))).toBe(true);
    expect(state.recorded.at(-1)?.[0]).toBe(Math.max(...answered) + 1);
  });

  it('a failed batch holds the cursor before it, even when later batches are answered', async () => {
    const state = stateOf(200);
    const service = new FakeOptoutService(new Map(), {
      failOn: (call) => (call === 2 ? new ServerError(503, 'server_error', undefined) : undefined),
    });
    const result = await sweepStateOptouts({ state, nowS: NOW_S, check: service.check, batchSize: 50 });
    expect(result.counts.batchesFailed).toBe(1);
    expect(state.recorded.length).toBeGreaterThan(1);
    // the first batch moved it; the second failed; the ones after were recorded, without moving it
    expect(state.cursor).toBe(state.recorded[0]?.at(-1));
    const next = await sweepStateOptouts({
      state,
      nowS: NOW_S + 1,
      check: new FakeOptoutService(new Map()).check,
      batchSize: 50,
      fraction: 0.05,
    });
    expect(next.counts.entries).toBe(10);
    expect(state.recorded.at(-1)?.[0]).toBe((state.recorded[0]?.at(-1) ?? 0) + 1);
  });
});
