import { describe, expect, it } from 'vitest';
import { ClockSkewError, ServerError, UnauthorizedError, type MapV3Item } from '../../src/protocol/index.js';
import {
  CHANGES_HEADER,
  changeCells,
  RemapEngine,
  settleEntry,
  type RemapChange,
  type RemapOptions,
  type RemapResult,
} from '../../src/pipeline/remap/remap-engine.js';
import type { DiiType } from '../../src/identity/index.js';
import { DAY_S, FakeRemapper, FakeRemapState, hashOf, NOW_S, uidOf } from './remap-fakes.js';

/** A state of n entries, the i-th due at NOW_S + (i % spread - dueShare) days: some past r, the rest future. */
function stateWith(n: number, isDue: (i: number) => boolean): FakeRemapState {
  const state = new FakeRemapState();
  for (let i = 0; i < n; i++) {
    const type: DiiType = i % 3 === 0 ? 'phone' : 'email';
    state.add(type, hashOf(i), isDue(i) ? NOW_S - (i % 5) * DAY_S : NOW_S + 1 + (i % 7) * DAY_S);
  }
  return state;
}

/** Rotates the raw UID of every hash whose first char is below 'M'; keeps the rest; r one year on. */
function rotatingAnswer(type: DiiType, hash: string): MapV3Item {
  const old = uidOf(`${type}:${hash}:0`);
  if (hash.charCodeAt(0) < 77) return { u: uidOf(`${type}:${hash}:1`), p: old, r: NOW_S + 365 * DAY_S };
  return { u: old, p: null, r: NOW_S + 365 * DAY_S };
}

/** Runs an engine and keeps the rows it hands to the changes file. */
async function collect(
  options: RemapOptions,
): Promise<{ changes: RemapChange[]; result: RemapResult; engine: RemapEngine }> {
  const changes: RemapChange[] = [];
  const engine = new RemapEngine({ ...options, onChanges: (c) => void changes.push(...c) });
  const result = await engine.run();
  return { changes, result, engine };
}

describe('RemapEngine', () => {
  it('sends exactly the due entries, in pages through the r index, and moves every r into the future', async () => {
    const state = stateWith(2_300, (i) => i % 4 === 0);
    const dueBefore = state
      .due(NOW_S)
      .map((e) => `${e.type}:${e.hash}`)
      .sort();
    expect(dueBefore.length).toBe(575);
    const mapper = new FakeRemapper({ answer: rotatingAnswer });
    const { result } = await collect({ state, mapBatch: mapper.mapBatch, nowS: NOW_S, batchSize: 100, concurrency: 3 });

    expect(result.outcome).toEqual({ kind: 'completed' });
    const sent = mapper.requests.flatMap((r) => [
      ...(r.email_hash ?? []).map((h) => `email:${h}`),
      ...(r.phone_hash ?? []).map((h) => `phone:${h}`),
    ]);
    expect(sent.sort()).toEqual(dueBefore);
    expect(mapper.requests.length).toBe(6);
    expect(mapper.requests.every((r) => (r.email_hash?.length ?? 0) + (r.phone_hash?.length ?? 0) <= 100)).toBe(true);
    // kinds are mixed in one request
    expect(mapper.requests.some((r) => (r.email_hash?.length ?? 0) > 0 && (r.phone_hash?.length ?? 0) > 0)).toBe(true);
    expect(state.due(NOW_S)).toEqual([]);
    // every page asks for what is due now, after the last entry of the page before
    expect(state.pages.every((p) => p.nowS === NOW_S && p.limit === 100)).toBe(true);
    expect(state.pages[0].after).toBeNull();
    for (let i = 1; i < state.pages.length; i++) expect(state.pages[i].after).not.toBeNull();
    expect(result.counts.selected).toBe(575);
    expect(result.counts.status).toEqual({ mapped: 575, optout: 0, invalid: 0, error: 0 });
  });

  it('commits each answered batch once, with the run clock, and never the not-due entries', async () => {
    const state = stateWith(1_000, (i) => i % 2 === 0);
    const mapper = new FakeRemapper({ answer: rotatingAnswer });
    await collect({ state, mapBatch: mapper.mapBatch, nowS: NOW_S, batchSize: 128, concurrency: 4 });
    expect(state.commits.length).toBe(mapper.requests.length);
    expect(state.commits.map((c) => c.updates.length).reduce((a, b) => a + b, 0)).toBe(500);
    expect(state.commits.every((c) => c.nowS === NOW_S)).toBe(true);
    const notDue = state.entries.filter((_, i) => i % 2 === 1);
    expect(notDue.every((e) => e.lastMappedS === null)).toBe(true);
  });

  it('lists exactly the entries whose raw UID changed, or that became optout or invalid', async () => {
    const state = stateWith(600, () => true);
    const optoutHash = state.entries[10].hash;
    const invalidHash = state.entries[11].hash;
    const answer = (type: DiiType, hash: string): MapV3Item =>
      hash === optoutHash
        ? { e: 'optout' }
        : hash === invalidHash
          ? { e: 'invalid identifier' }
          : rotatingAnswer(type, hash);
    const before = new Map(state.entries.map((e) => [e.hash, { ...e }]));
    const mapper = new FakeRemapper({ answer });
    const { changes, result } = await collect({ state, mapBatch: mapper.mapBatch, nowS: NOW_S, batchSize: 64 });

    const rotated = state.entries.filter((e) => e.status === 'mapped' && e.u !== before.get(e.hash)?.u);
    expect(rotated.length).toBeGreaterThan(100);
    expect(rotated.length).toBeLessThan(590);
    const expected = new Set([...rotated.map((e) => e.hash), optoutHash, invalidHash]);
    expect(new Set(changes.map((c) => c.hash))).toEqual(expected);
    expect(changes.length).toBe(expected.size);
    for (const c of changes.filter((c) => c.status === 'mapped')) {
      const old = before.get(c.hash);
      expect(c.oldRawUid).toBe(old?.u);
      expect(c.newRawUid).toBe(uidOf(`${c.kind}:${c.hash}:1`));
      // the service's p: the raw UID before the rotation
      expect(c.prevRawUid).toBe(old?.u);
      expect(c.refreshFrom).toBe(NOW_S + 365 * DAY_S);
    }
    const optout = changes.find((c) => c.hash === optoutHash);
    expect(optout).toMatchObject({
      status: 'optout',
      newRawUid: null,
      refreshFrom: null,
      oldRawUid: before.get(optoutHash)?.u,
    });
    expect(changes.find((c) => c.hash === invalidHash)?.status).toBe('invalid');
    // the tombstone keeps its hash and status and loses its raw UIDs and r, so it is never due again
    const tomb = state.entries.find((e) => e.hash === optoutHash);
    expect(tomb).toMatchObject({ status: 'optout', u: null, p: null, r: null });
    expect(result.counts.changed).toBe(rotated.length);
    expect(result.counts.unchanged).toBe(598 - rotated.length);
    expect(result.counts.status).toEqual({ mapped: 598, optout: 1, invalid: 1, error: 0 });
  });

  it('writes the changes in the order the entries were selected (r, then id), whatever order the answers come in', async () => {
    const changedHashes = async (answerOrder: 'reverse' | 'as sent'): Promise<string[]> => {
      const state = stateWith(640, () => true);
      const mapper = new FakeRemapper({ answer: rotatingAnswer });
      // every batch is held until all ten are in flight, then answered last first (or first first)
      const held: (() => void)[] = [];
      const mapBatch: RemapOptions['mapBatch'] = async (request, signal) => {
        await new Promise<void>((resolve) => {
          held.push(resolve);
          if (held.length === 10) for (const go of answerOrder === 'reverse' ? [...held].reverse() : held) go();
        });
        return mapper.mapBatch(request, signal);
      };
      const { changes, result } = await collect({ state, mapBatch, nowS: NOW_S, batchSize: 64, concurrency: 20 });
      expect(result.counts.batches).toBe(10);
      return changes.map((c) => c.hash);
    };
    const reverse = await changedHashes('reverse');
    const inOrder = await changedHashes('as sent');
    expect(reverse.length).toBeGreaterThan(100);
    expect(reverse).toEqual(inOrder);
    // selection order: by r, then by id (the order of stateWith's entries)
    const state = stateWith(640, () => true);
    const selected = [...state.entries].sort((a, b) => (a.r as number) - (b.r as number) || a.id - b.id);
    const changed = new Set(reverse);
    expect(reverse).toEqual(selected.filter((e) => changed.has(e.hash)).map((e) => e.hash));
  });

  it('a second run at the same now sends nothing', async () => {
    const state = stateWith(300, (i) => i % 3 !== 0);
    const mapper = new FakeRemapper({ answer: rotatingAnswer });
    await collect({ state, mapBatch: mapper.mapBatch, nowS: NOW_S, batchSize: 50 });
    const sentFirst = mapper.requests.length;
    expect(sentFirst).toBeGreaterThan(0);
    const { result, changes } = await collect({ state, mapBatch: mapper.mapBatch, nowS: NOW_S, batchSize: 50 });
    expect(mapper.requests.length).toBe(sentFirst);
    expect(result.counts.selected).toBe(0);
    expect(changes).toEqual([]);
  });

  it('--limit caps the entries of one run; the next run takes the rest', async () => {
    const state = stateWith(500, () => true);
    const mapper = new FakeRemapper({ answer: rotatingAnswer });
    const first = await collect({ state, mapBatch: mapper.mapBatch, nowS: NOW_S, batchSize: 60, limit: 130 });
    expect(first.result.counts.selected).toBe(130);
    expect(mapper.hashesSent.length).toBe(130);
    expect(mapper.requests.map((r) => (r.email_hash?.length ?? 0) + (r.phone_hash?.length ?? 0))).toEqual([60, 60, 10]);
    expect(state.due(NOW_S).length).toBe(370);
    const second = await collect({ state, mapBatch: mapper.mapBatch, nowS: NOW_S, batchSize: 60 });
    expect(second.result.counts.selected).toBe(370);
    expect(new Set(mapper.hashesSent).size).toBe(500);
  });

  it('takes the most overdue entries first', async () => {
    const state = new FakeRemapState();
    for (let i = 0; i < 40; i++) state.add('email', hashOf(i), NOW_S - (i % 10) * DAY_S);
    const mapper = new FakeRemapper({ answer: rotatingAnswer });
    await collect({ state, mapBatch: mapper.mapBatch, nowS: NOW_S, batchSize: 8, limit: 8, concurrency: 1 });
    const taken = new Set(mapper.hashesSent);
    const takenR = state.entries.filter((e) => taken.has(e.hash)).map((e) => e.id);
    expect(takenR.every((id) => (id - 1) % 10 === 9 || (id - 1) % 10 === 8)).toBe(true);
  });

  it('keeps at most N requests in flight', async () => {
    const state = stateWith(3_000, () => true);
    let seed = 7;
    const mapper = new FakeRemapper({
      answer: rotatingAnswer,
      latencyMs: () => (seed = (seed * 48271) % 2147483647) % 5,
    });
    const { engine } = await collect({ state, mapBatch: mapper.mapBatch, nowS: NOW_S, batchSize: 40, concurrency: 4 });
    expect(mapper.requests.length).toBe(75);
    expect(mapper.peakInFlight).toBeLessThanOrEqual(4);
    expect(mapper.peakInFlight).toBeGreaterThan(1);
    expect(engine.limiter.peakInFlight).toBeLessThanOrEqual(4);
  });

  it('a failed batch is not committed, its entries stay due for the next run, the others go on', async () => {
    const state = stateWith(400, () => true);
    const mapper = new FakeRemapper({
      answer: rotatingAnswer,
      failOn: (call) => (call === 2 ? new ServerError(503, 'server_error', undefined) : undefined),
    });
    const { result } = await collect({ state, mapBatch: mapper.mapBatch, nowS: NOW_S, batchSize: 100, concurrency: 1 });
    expect(result.outcome).toEqual({ kind: 'completed' });
    expect(result.counts.batchesFailed).toBe(1);
    expect(result.counts.status.error).toBe(100);
    expect(result.counts.status.mapped).toBe(300);
    expect(result.batchErrors.length).toBe(1);
    expect(state.commits.length).toBe(3);
    const failedHashes = new Set([...(mapper.requests[1].email_hash ?? []), ...(mapper.requests[1].phone_hash ?? [])]);
    expect(new Set(state.due(NOW_S).map((e) => e.hash))).toEqual(failedHashes);
  });

  it('stops at a 401 and reports auth-refused', async () => {
    const state = stateWith(500, () => true);
    const mapper = new FakeRemapper({
      answer: rotatingAnswer,
      failOn: () => new UnauthorizedError(401, 'unauthorized', undefined),
    });
    const { result } = await collect({ state, mapBatch: mapper.mapBatch, nowS: NOW_S, batchSize: 100, concurrency: 1 });
    expect(result.outcome.kind).toBe('auth-refused');
    expect(mapper.requests.length).toBe(1);
    expect(state.commits.length).toBe(0);
    expect(state.due(NOW_S).length).toBe(500);
  });

  it('stops at clock skew: every further request would be refused too', async () => {
    const state = stateWith(500, () => true);
    const mapper = new FakeRemapper({
      answer: rotatingAnswer,
      failOn: () => new ClockSkewError(400, 'client_error', 'Invalid timestamp'),
    });
    const { result } = await collect({ state, mapBatch: mapper.mapBatch, nowS: NOW_S, batchSize: 100, concurrency: 1 });
    expect(result.outcome.kind).toBe('failed');
    expect(mapper.requests.length).toBe(1);
  });

  it('an interrupt stops selecting; requests in flight finish and commit; a re-run takes exactly the rest', async () => {
    const state = stateWith(1_000, () => true);
    const controller = new AbortController();
    const mapper = new FakeRemapper({ answer: rotatingAnswer, latencyMs: () => 2 });
    const { result } = await collect({
      state,
      mapBatch: mapper.mapBatch,
      nowS: NOW_S,
      batchSize: 50,
      concurrency: 2,
      signal: controller.signal,
      onProgress: (c) => {
        if (c.batchesCommitted === 3) controller.abort();
      },
    });
    expect(result.outcome).toEqual({ kind: 'interrupted' });
    const committed = state.commits.flatMap((c) => c.updates).length;
    expect(committed).toBeGreaterThanOrEqual(150);
    expect(committed).toBeLessThan(1_000);
    // whatever was sent was committed: nothing answered is lost
    expect(mapper.hashesSent.length).toBe(committed);
    expect(state.due(NOW_S).length).toBe(1_000 - committed);
    const rerun = new FakeRemapper({ answer: rotatingAnswer });
    await collect({ state, mapBatch: rerun.mapBatch, nowS: NOW_S, batchSize: 50 });
    expect(rerun.hashesSent.length).toBe(1_000 - committed);
    expect(state.due(NOW_S).length).toBe(0);
  });

  it('a commit that fails stops the run with failed', async () => {
    const state = stateWith(300, () => true);
    state.failCommitOn = 2;
    const mapper = new FakeRemapper({ answer: rotatingAnswer });
    const { result, changes } = await collect({
      state,
      mapBatch: mapper.mapBatch,
      nowS: NOW_S,
      batchSize: 100,
      concurrency: 1,
    });
    expect(result.outcome.kind).toBe('failed');
    expect(state.commits.length).toBe(1);
    // changes only of what is in the state
    const committed = new Set(state.commits[0].updates.map((u) => u.hash));
    expect(changes.every((c) => committed.has(c.hash))).toBe(true);
  });

  it('never sends an entry twice in one run, even when its new r is still due under --now', async () => {
    const state = stateWith(200, () => true);
    // a service whose clock is behind --now: every new r is still <= now
    const mapper = new FakeRemapper({
      answer: (type, hash) => ({ u: uidOf(`${type}:${hash}:2`), p: null, r: NOW_S - 1 }),
    });
    const { result } = await collect({ state, mapBatch: mapper.mapBatch, nowS: NOW_S, batchSize: 30, concurrency: 2 });
    expect(mapper.hashesSent.length).toBe(200);
    expect(new Set(mapper.hashesSent).size).toBe(200);
    expect(result.counts.stillDue).toBe(200);
  });

  it('an answer of the wrong length fails the batch instead of pairing answers with the wrong entries', async () => {
    const state = stateWith(10, () => true);
    const { result } = await collect({
      state,
      nowS: NOW_S,
      mapBatch: async (request) => ({
        email: [],
        phone: [],
        email_hash: (request.email_hash ?? []).slice(1).map(() => ({ u: uidOf('x'), p: null, r: NOW_S + DAY_S })),
        phone_hash: [],
      }),
    });
    expect(result.counts.batchesFailed).toBe(1);
    expect(state.commits.length).toBe(0);
    expect(result.batchErrors[0]).toMatch(/answered/);
  });
});

describe('settleEntry and changeCells', () => {
  const entry = {
    id: 1,
    type: 'email' as const,
    hash: hashOf(1),
    u: uidOf('a'),
    p: null,
    r: NOW_S - 1,
    bucketId: null,
  };

  it('same raw UID: only r moves, no changes row', () => {
    const s = settleEntry(entry, { u: entry.u as string, p: null, r: NOW_S + DAY_S });
    expect(s.change).toBeNull();
    expect(s.update).toEqual({
      type: 'email',
      hash: entry.hash,
      outcome: { kind: 'mapped', u: entry.u, p: null, r: NOW_S + DAY_S },
    });
  });

  it('rotated raw UID: a row with old, new, previous and the new r', () => {
    const s = settleEntry(entry, { u: uidOf('b'), p: uidOf('a'), r: NOW_S + DAY_S });
    expect(changeCells(s.change as RemapChange)).toEqual([
      'email',
      entry.hash,
      uidOf('a'),
      uidOf('b'),
      uidOf('a'),
      String(NOW_S + DAY_S),
      'mapped',
    ]);
    expect(CHANGES_HEADER).toEqual([
      'hash_type',
      'hash',
      'old_raw_uid',
      'raw_uid',
      'prev_raw_uid',
      'refresh_from',
      'status',
    ]);
    expect(changeCells(s.change as RemapChange, 'iso')[5]).toBe(
      new Date((NOW_S + DAY_S) * 1000).toISOString().replace('.000Z', 'Z'),
    );
  });

  it('an unknown error value counts as invalid', () => {
    const s = settleEntry(entry, { e: 'something new' });
    expect(s.status).toBe('invalid');
    expect(changeCells(s.change as RemapChange)).toEqual(['email', entry.hash, uidOf('a'), '', '', '', 'invalid']);
  });
});
