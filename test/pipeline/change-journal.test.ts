import { afterAll, describe, expect, it } from 'vitest';
import { replaySweepOptouts, sweepStateOptouts, type SweptRawUid } from '../../src/pipeline/optout/optout-sweep.js';
import { RemapEngine, replayRemapChanges, type RemapChange } from '../../src/pipeline/remap/remap-engine.js';
import type { StateStore } from '../../src/state/index.js';
import { b64, tmpStates } from '../state/tmp-state.js';
import { FakeOptoutService } from './optout-fakes.js';
import { DAY_S, FakeRemapper, NOW_S } from './remap-fakes.js';

const t = tmpStates('uid2-change-journal-');
afterAll(() => t.cleanup());

/** Stores `labels` as email entries due now, with raw UID b64(`u-${label}`). */
function addDue(s: StateStore, labels: string[]): void {
  s.commitBatch(
    labels.map((l) => ({
      type: 'email' as const,
      hash: b64(l),
      outcome: { kind: 'mapped' as const, u: b64(`u-${l}`), p: null, r: NOW_S - DAY_S },
    })),
    NOW_S - 2 * DAY_S,
  );
}

/** Every due hash gets a new raw UID. */
const rotating = new FakeRemapper({
  answer: (_type, hash) => ({ u: b64(`new-${hash}`), p: b64(`old-${hash}`), r: NOW_S + 365 * DAY_S }),
});

/** One remap run as remap-due does it: earlier pending rows first, then this run's, with the journal. */
async function remapRun(
  s: StateStore,
  runId: number,
): Promise<{ out: RemapChange[]; replayed: number; upTo: number | null }> {
  const out: RemapChange[] = [];
  const replayed = await replayRemapChanges(s, (rows) => void out.push(...rows));
  const result = await new RemapEngine({
    state: s,
    nowS: NOW_S,
    mapBatch: rotating.mapBatch,
    batchSize: 2,
    concurrency: 1,
    journal: { runId, state: s },
    onChanges: (rows) => void out.push(...rows),
  }).run();
  expect(result.outcome).toEqual({ kind: 'completed' });
  return { out, replayed, upTo: result.journalUpTo };
}

describe('remap change rows through the journal', () => {
  it('rows of a run whose output was never committed come first in the next run, and leave once acknowledged', async () => {
    const s = t.open(t.file());
    addDue(s, ['a', 'b', 'c']);
    // run 1 answers and commits everything, then dies before its changes file is renamed: no ack
    const first = await remapRun(s, 1);
    expect(first.replayed).toBe(0);
    expect(first.out.map((c) => c.hash).sort()).toEqual([b64('a'), b64('b'), b64('c')].sort());
    expect(s.pendingChanges('remap').length).toBe(3);
    expect(s.countDue(NOW_S)).toBe(0);

    addDue(s, ['d']);
    const second = await remapRun(s, 2);
    expect(second.replayed).toBe(3);
    // the earlier run's rows, as they were written, then this run's
    expect(second.out.slice(0, 3)).toEqual(first.out);
    expect(second.out.slice(3).map((c) => c.hash)).toEqual([b64('d')]);
    expect(second.out[3]).toMatchObject({ oldRawUid: b64('u-d'), newRawUid: b64(`new-${b64('d')}`), status: 'mapped' });
    expect(second.upTo).toBe(s.lastPendingChangeId('remap'));

    // the output is committed: acknowledge
    s.ackChanges('remap', second.upTo as number);
    expect(s.pendingChanges('remap')).toEqual([]);
    const third = await remapRun(s, 3);
    expect(third).toEqual({ out: [], replayed: 0, upTo: null });
  });

  it('without a journal nothing is kept pending (the engine as map and tests use it)', async () => {
    const s = t.open(t.file());
    addDue(s, ['e', 'f']);
    const result = await new RemapEngine({ state: s, nowS: NOW_S, mapBatch: rotating.mapBatch }).run();
    expect(result.counts.changeRows).toBe(2);
    expect(result.journalUpTo).toBeNull();
    expect(s.pendingChanges('remap')).toEqual([]);
  });
});

describe('opt-out rows of the state sweep through the journal', () => {
  it('an opt-out found by a sweep whose output was lost is written first by the next sweep', async () => {
    const s = t.open(t.file());
    addDue(s, ['g', 'h', 'i']);
    const service = new FakeOptoutService(new Map([[b64('u-h'), 1_790_000_000_000]]));
    const lost: SweptRawUid[] = [];
    const first = await sweepStateOptouts({
      state: s,
      nowS: NOW_S,
      check: service.check,
      journal: { runId: 1, state: s },
      onChecked: (r) => void lost.push(...r),
    });
    expect(first.counts.tombstoned).toBe(1);
    expect(first.journalUpTo).not.toBeNull();
    expect(s.pendingChanges('optout').length).toBe(1);

    const replayed: SweptRawUid[] = [];
    expect(await replaySweepOptouts(s, (rows) => void replayed.push(...rows))).toBe(1);
    expect(replayed).toEqual(lost.filter((r) => r.verdict.kind === 'opted_out'));
    expect(replayed[0]).toMatchObject({ rawUid: b64('u-h'), which: 'u', entry: { hash: b64('h') } });

    const second = await sweepStateOptouts({
      state: s,
      nowS: NOW_S + 1,
      check: service.check,
      journal: { runId: 2, state: s },
    });
    // nothing new opted out; the pending row is still the earlier one until acknowledged
    expect(second.journalUpTo).toBe(first.journalUpTo);
    s.ackChanges('optout', second.journalUpTo as number);
    expect(await replaySweepOptouts(s, () => undefined)).toBe(0);
  });
});
