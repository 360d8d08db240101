import { describe, expect, it } from 'vitest';
import { sha256Base64, type DiiType } from '../../src/identity/index.js';
import { MapEngine, type MapEngineOptions, type ThreadedEngineState } from '../../src/pipeline/map/map-engine.js';
import { outputRows } from '../../src/pipeline/map/result-columns.js';
import { packUpdates, unpackUpdates, type StoredEntries } from '../../src/pipeline/map/state-thread.js';
import type { EntryUpdate } from '../../src/state/types.js';
import { chunked, FakeMapper, FakeState, NOW_S, seeded } from './engine-fakes.js';

const COLUMNS = [{ name: 'email', index: 1, kind: 'email' as const }];
const h = (i: number) => sha256Base64(`user${i}@example.com`);

function emails(n: number): string[][] {
  return Array.from({ length: n }, (_, i) => [String(i), `user${i}@example.com`]);
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** FakeState behind the threaded interface: answers later (after a random pause), in the order asked. */
class ThreadedFake implements ThreadedEngineState {
  readonly threaded = true;
  /** Hashes whose commit has resolved. */
  readonly committed = new Set<string>();
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    readonly inner: FakeState,
    private readonly random: () => number,
  ) {}

  private inOrder<T>(work: () => T): Promise<T> {
    const delay = Math.floor(this.random() * 3);
    const next = this.queue.then(() => pause(delay)).then(work);
    this.queue = next.catch(() => undefined);
    return next;
  }

  lookupStored(type: DiiType, hashes: readonly string[]): Promise<StoredEntries> {
    return this.inOrder(() => this.inner.lookupStored(type, hashes));
  }

  commitBatch(updates: readonly EntryUpdate[], nowS: number): Promise<void> {
    const copy = unpackUpdates(packUpdates(updates));
    return this.inOrder(() => {
      this.inner.commitBatch(copy, nowS);
      for (const u of copy) this.committed.add(u.hash);
    });
  }
}

/**
 * A state whose lookups settle out of the order they were asked in, as a database's do when it answers them on
 * several sessions: each lookup waits less than the one before it, so the first asked is the last answered.
 */
class OutOfOrderLookups implements ThreadedEngineState {
  readonly threaded = true;
  private asked = 0;

  constructor(readonly inner: FakeState) {}

  async lookupStored(type: DiiType, hashes: readonly string[]): Promise<StoredEntries> {
    await pause(Math.max(0, 60 - 15 * this.asked++));
    return this.inner.lookupStored(type, hashes);
  }

  async commitBatch(updates: readonly EntryUpdate[], nowS: number): Promise<void> {
    this.inner.commitBatch(unpackUpdates(packUpdates(updates)), nowS);
  }
}

async function run(
  rows: string[][],
  options: Partial<MapEngineOptions> & { mapper: FakeMapper },
  onOut?: (row: string[]) => void,
) {
  const out: string[][] = [];
  const engine = new MapEngine({
    columns: COLUMNS,
    mapBatch: options.mapper.mapBatch,
    nowS: () => NOW_S,
    ...options,
    onChunk: (chunk) => {
      for (const row of outputRows(chunk, null)) {
        onOut?.(row);
        out.push(row);
      }
    },
  });
  const result = await engine.run(chunked(rows, 50));
  return { result, out };
}

function seed(state: FakeState): void {
  state.put('email', h(0), { status: 'mapped', u: 'U0', p: 'P0', r: NOW_S + 10 });
  state.put('email', h(1), { status: 'mapped', u: 'U1', p: null, r: NOW_S });
  state.put('email', h(2), { status: 'optout', u: null, p: null, r: null });
  state.put('email', h(3), { status: 'invalid', u: null, p: null, r: null });
}

describe('MapEngine with a state served by another thread', () => {
  it('answers, sends and counts exactly as with a state on the same thread', async () => {
    const rows = emails(2_000);
    for (let i = 0; i < 300; i++) rows.push([`again${i}`, `user${(i * 7) % 2_000}@example.com`]);
    const sameThread = new FakeState();
    seed(sameThread);
    const direct = await run(rows, { mapper: new FakeMapper(), state: sameThread, batchSize: 100 });

    const behind = new FakeState();
    seed(behind);
    const threaded = new ThreadedFake(behind, seeded(3));
    const mapper = new FakeMapper({ latency: () => 1 });
    const later = await run(rows, { mapper, state: threaded, batchSize: 100, concurrency: 4 });

    expect(later.result.outcome.kind).toBe('completed');
    expect(later.out).toEqual(direct.out);
    expect(later.result.counts.fromState).toBe(direct.result.counts.fromState);
    expect(later.result.counts.status).toEqual(direct.result.counts.status);
    // the due entry (r = now) and every unknown one were sent, once each
    expect(mapper.itemsSent).toBe(2_000 - 3);
    expect(behind.entries.size).toBe(2_000);
  });

  it('maps and commits every row when lookups settle out of order (a database on several sessions)', async () => {
    const rows = emails(300);
    const direct = await run(rows, { mapper: new FakeMapper(), state: new FakeState(), batchSize: 5_000 });
    const behind = new FakeState();
    const mapper = new FakeMapper();
    // six chunks of 50 rows: six lookups, the first answered last; every identifier fits one batch
    const later = await run(rows, { mapper, state: new OutOfOrderLookups(behind), batchSize: 5_000 });

    expect(later.result.outcome.kind).toBe('completed');
    expect(later.out).toEqual(direct.out);
    expect(later.out).toHaveLength(300);
    expect(mapper.itemsSent).toBe(300);
    expect(behind.entries.size).toBe(300);
  });

  it('hands a row on only once the batch that answered it is committed', async () => {
    const threaded = new ThreadedFake(new FakeState(), seeded(5));
    const early: string[] = [];
    const { result } = await run(
      emails(1_500),
      { mapper: new FakeMapper({ latency: () => 0 }), state: threaded, batchSize: 100, concurrency: 8 },
      (row) => {
        const hash = sha256Base64(row[1]);
        if (!threaded.committed.has(hash)) early.push(row[1]);
      },
    );
    expect(result.outcome.kind).toBe('completed');
    expect(result.counts.batchesCommitted).toBe(15);
    expect(early).toEqual([]);
  });

  it('a re-run answers everything from the state and sends nothing', async () => {
    const rows = emails(1_000);
    const threaded = new ThreadedFake(new FakeState(), seeded(9));
    const first = await run(rows, { mapper: new FakeMapper(), state: threaded, batchSize: 100 });
    const again = new FakeMapper();
    const second = await run(rows, { mapper: again, state: threaded, batchSize: 100 });
    expect(again.requests).toHaveLength(0);
    expect(second.result.counts.fromState).toBe(1_000);
    expect(second.out).toEqual(first.out);
  });

  it('a lookup that fails stops the run as failed', async () => {
    const threaded = new ThreadedFake(new FakeState(), seeded(1));
    threaded.lookupStored = () => Promise.reject(new Error('disk I/O error'));
    const { result } = await run(emails(300), { mapper: new FakeMapper(), state: threaded, batchSize: 100 });
    expect(result.outcome).toMatchObject({ kind: 'failed', error: { message: 'disk I/O error' } });
  });
});

describe('packUpdates', () => {
  it('gives back the updates it was given', () => {
    const updates: EntryUpdate[] = [
      { type: 'email', hash: 'a', outcome: { kind: 'mapped', u: 'U', p: 'P', r: 5 } },
      { type: 'phone', hash: 'b', outcome: { kind: 'mapped', u: 'U2', p: null, r: null, bucketId: 'B' } },
      { type: 'email', hash: 'c', outcome: { kind: 'optout', optedOutSinceMs: 1_700_000_000_000 } },
      { type: 'phone', hash: 'd', outcome: { kind: 'optout' } },
      { type: 'email', hash: 'e', outcome: { kind: 'invalid' } },
    ];
    expect(unpackUpdates(packUpdates(updates))).toEqual(updates);
  });
});
