import { existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { replaySweepOptouts, sweepStateOptouts, type SweptRawUid } from '../../src/pipeline/optout/optout-sweep.js';
import {
  changeCells,
  CHANGES_HEADER,
  RemapEngine,
  replayRemapChanges,
  type RemapChange,
} from '../../src/pipeline/remap/remap-engine.js';
import {
  changeChannel,
  commitDelivering,
  deliveringOutput,
  deliveryKey,
  isChangeChannel,
} from '../../src/pipeline/run/change-journal.js';
import { commitTogether } from '../../src/pipeline/io/output/commit-together.js';
import { openSink } from '../../src/pipeline/io/output/sink.js';
import type { SealedOutput, TableSink } from '../../src/pipeline/io/table.js';
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
  const replayed = await replayRemapChanges(s, 'remap', (rows) => void out.push(...rows));
  const result = await new RemapEngine({
    state: s,
    nowS: NOW_S,
    mapBatch: rotating.mapBatch,
    batchSize: 2,
    concurrency: 1,
    journal: { runId, channel: 'remap', state: s },
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

describe('change channels: a shard delivers its own rows only', () => {
  it('names the kind alone for a whole run, and K/N as --shard takes it for a shard', () => {
    expect(changeChannel('remap')).toBe('remap');
    expect(changeChannel('remap', { index: 1, count: 1 })).toBe('remap');
    expect(changeChannel('optout', { index: 3, count: 4 })).toBe('optout 2/4');
    expect(['remap', 'optout 0/3', 'remap 2/3'].every(isChangeChannel)).toBe(true);
    expect(['map', 'remap 3/3', 'remap 1', 'remap 01/3', 'optout 0/0', ''].some(isChangeChannel)).toBe(false);
  });

  it("a shard's opt-outs wait for that shard: another shard and a whole sweep replay none of them", async () => {
    const s = t.open(t.file());
    addDue(s, ['g', 'h', 'i']);
    const service = new FakeOptoutService(new Map([[b64('u-h'), 1_790_000_000_000]]));
    const first = await sweepStateOptouts({
      state: s,
      nowS: NOW_S,
      check: service.check,
      journal: { runId: 1, channel: 'optout 0/2', state: s },
    });
    expect(first.journalUpTo).not.toBeNull();
    const replayed: SweptRawUid[] = [];
    expect(await replaySweepOptouts(s, 'optout 1/2', (rows) => void replayed.push(...rows))).toBe(0);
    expect(await replaySweepOptouts(s, 'optout', (rows) => void replayed.push(...rows))).toBe(0);
    expect(await replaySweepOptouts(s, 'optout 0/2', (rows) => void replayed.push(...rows))).toBe(1);
    expect(replayed.map((r) => r.rawUid)).toEqual([b64('u-h')]);
    // a whole sweep's acknowledgement leaves the shard's rows where they are
    s.ackChanges('optout', first.journalUpTo as number);
    expect(s.lastPendingChangeId('optout 0/2')).toBe(first.journalUpTo);
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
      journal: { runId: 1, channel: 'optout', state: s },
      onChecked: (r) => void lost.push(...r),
    });
    expect(first.counts.tombstoned).toBe(1);
    expect(first.journalUpTo).not.toBeNull();
    expect(s.pendingChanges('optout').length).toBe(1);

    const replayed: SweptRawUid[] = [];
    expect(await replaySweepOptouts(s, 'optout', (rows) => void replayed.push(...rows))).toBe(1);
    expect(replayed).toEqual(lost.filter((r) => r.verdict.kind === 'opted_out'));
    expect(replayed[0]).toMatchObject({ rawUid: b64('u-h'), which: 'u', entry: { hash: b64('h') } });

    const second = await sweepStateOptouts({
      state: s,
      nowS: NOW_S + 1,
      check: service.check,
      journal: { runId: 2, channel: 'optout', state: s },
    });
    // nothing new opted out; the pending row is still the earlier one until acknowledged
    expect(second.journalUpTo).toBe(first.journalUpTo);
    s.ackChanges('optout', second.journalUpTo as number);
    expect(await replaySweepOptouts(s, 'optout', () => undefined)).toBe(0);
  });
});

/** Writes `changes` to a changes file at `path`, not yet committed. */
async function changesFile(path: string, changes: RemapChange[]): Promise<TableSink> {
  const sink = await openSink({ path, format: 'csv', header: [...CHANGES_HEADER] });
  await sink.writeRows(changes.map((c) => changeCells(c)));
  return sink;
}

/** A file sink whose process is killed at the rename: it calls `sealed`, then never renames. */
function killedAtRename(sink: TableSink): TableSink {
  return {
    ...sink,
    writeRows: (rows) => sink.writeRows(rows),
    writeEncoded: (bytes) => sink.writeEncoded(bytes),
    abort: () => sink.abort(),
    commit: async (sealed?: (file: SealedOutput) => void | Promise<void>) => {
      await sink.commit(async (file) => {
        await sealed?.(file);
        throw new Error('killed');
      });
    },
  };
}

describe('a changes file is delivered exactly once, whatever the kill point around its rename', () => {
  it('a file in place: the next run writes none of its rows again', async () => {
    const s = t.open(t.file());
    addDue(s, ['a', 'b', 'c']);
    const first = await remapRun(s, 1);
    const sink = await changesFile(t.file('delivered.csv'), first.out);
    await commitDelivering(sink, s, { channel: 'remap', upTo: first.upTo }, () => undefined);
    expect(readFileSync(t.file('delivered.csv'), 'utf8').split('\n').length).toBe(5);
    const second = await remapRun(s, 2);
    expect(second).toEqual({ out: [], replayed: 0, upTo: null });
  });

  it('killed between the rename and the acknowledgement: the next run finds the file in place', async () => {
    const s = t.open(t.file());
    addDue(s, ['a', 'b', 'c']);
    const first = await remapRun(s, 1);
    const sink = await changesFile(t.file('renamed.csv'), first.out);
    // the acknowledgement never comes: the process died right after the rename
    const dying = {
      setMeta: s.setMeta.bind(s),
      ackChanges: () => {
        throw new Error('killed');
      },
    };
    const said: string[] = [];
    await commitDelivering(sink, dying, { channel: 'remap', upTo: first.upTo }, (l) => void said.push(l));
    expect(said).toEqual([]);
    expect(s.pendingChanges('remap').length).toBe(3);
    const second = await remapRun(s, 2);
    expect(second.replayed).toBe(0);
    expect(s.pendingChanges('remap')).toEqual([]);
    expect(s.getMeta(deliveryKey('remap'))).toBe('');
  });

  it('killed after the record and before the rename: the next run writes the rows', async () => {
    const s = t.open(t.file());
    addDue(s, ['a', 'b', 'c']);
    const first = await remapRun(s, 1);
    const sink = killedAtRename(await changesFile(t.file('never.csv'), first.out));
    await expect(commitDelivering(sink, s, { channel: 'remap', upTo: first.upTo }, () => undefined)).rejects.toThrow();
    expect(s.getMeta(deliveryKey('remap'))).toContain('sealed');
    const second = await remapRun(s, 2);
    expect(second.replayed).toBe(3);
    expect(second.out).toEqual(first.out);
  });

  it('a delivered file leaves no record and nothing pending', async () => {
    const s = t.open(t.file());
    addDue(s, ['a']);
    const first = await remapRun(s, 1);
    const path = t.file('done.csv');
    await commitDelivering(
      await changesFile(path, first.out),
      s,
      { channel: 'remap', upTo: first.upTo },
      () => undefined,
    );
    expect(s.getMeta(deliveryKey('remap'))).toBe('');
    expect(s.pendingChanges('remap')).toEqual([]);
  });
});

describe("a changes file committed together with the run's other outputs", () => {
  it('is recorded just before its own rename, once every output is complete', async () => {
    const s = t.open(t.file());
    addDue(s, ['a', 'b']);
    const first = await remapRun(s, 1);
    const path = t.file('together.csv');
    const other = await openSink({ path: t.file('together-bad-rows.csv'), format: 'csv', header: ['line'] });
    await other.writeRows([['1']]);
    const seen: { inPlace: boolean; ino: number }[] = [];
    const journal = {
      setMeta: (key: string, value: string) => {
        if (value.includes('sealed')) seen.push({ inPlace: existsSync(path), ino: JSON.parse(value).ino });
        s.setMeta(key, value);
      },
      ackChanges: s.ackChanges.bind(s),
    };
    const changes = deliveringOutput(
      await changesFile(path, first.out),
      journal,
      { channel: 'remap', upTo: first.upTo },
      () => undefined,
    );
    await commitTogether([changes, other]);
    expect(seen).toEqual([{ inPlace: false, ino: statSync(path).ino }]);
    expect(s.pendingChanges('remap')).toEqual([]);
    expect(s.getMeta(deliveryKey('remap'))).toBe('');
  });

  it('another output that cannot be finished: nothing is renamed or recorded, the rows stay pending', async () => {
    const s = t.open(t.file());
    addDue(s, ['a', 'b', 'c']);
    const first = await remapRun(s, 1);
    const path = t.file('not-together.csv');
    const other = await openSink({ path: t.file('not-together-bad-rows.csv'), format: 'csv', header: ['line'] });
    await other.writeRows([['1']]);
    // its path became a directory while the run was going
    mkdirSync(t.file('not-together-bad-rows.csv'));
    const changes = deliveringOutput(
      await changesFile(path, first.out),
      s,
      { channel: 'remap', upTo: first.upTo },
      () => undefined,
    );
    await expect(commitTogether([changes, other])).rejects.toThrow(/is a directory/);
    expect(existsSync(path)).toBe(false);
    expect(s.getMeta(deliveryKey('remap')) ?? '').toBe('');
    const second = await remapRun(s, 2);
    expect(second.replayed).toBe(3);
    expect(second.out).toEqual(first.out);
  });
});
