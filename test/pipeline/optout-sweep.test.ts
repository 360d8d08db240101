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
    expect(result.counts.status).toEqual({ opted_out: 2, not_opted_out: expected - 2, invalid: 0, error: 0 });
  });

  it('--sweep-fraction checks the least recently checked ceil(F * entries) per run; 20 runs of 0.05 cover everything', async () => {
    const state = stateOf(1_001, (i) => (i < 500 ? 1_000 + i : null));
    const service = new FakeOptoutService(new Map());
    const first = await sweepStateOptouts({ state, nowS: NOW_S, check: service.check, fraction: 0.05 });
    expect(first.counts.planned).toBe(51);
    expect(first.counts.entries).toBe(51);
    // never-checked entries go first
    expect(state.recorded.flat().every((id) => id > 500)).toBe(true);

    const checkedIn = new Map<number, number>();
    for (let run = 0; run < 20; run++) {
      const before = state.recorded.flat().length;
      await sweepStateOptouts({ state, nowS: NOW_S + (run + 1) * 86_400, check: service.check, fraction: 0.05 });
      for (const id of state.recorded.flat().slice(before)) checkedIn.set(id, (checkedIn.get(id) ?? 0) + 1);
    }
    expect(checkedIn.size).toBe(1_001);
    expect(state.entries.every((e) => e.lastOptoutCheckS !== null && e.lastOptoutCheckS >= NOW_S)).toBe(true);
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
    const next = await sweepStateOptouts({
      state,
      nowS: NOW_S + 1,
      check: new FakeOptoutService(new Map()).check,
      fraction: 0.1,
    });
    expect(next.counts.entries).toBe(20);
    expect(state.recorded.at(-1)?.every((id) => !answered.has(id))).toBe(true);
  });
});
