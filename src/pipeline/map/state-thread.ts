/** The state file of a writing map run served by a thread of its own: lookups and commits off the main thread. */
import type { DiiType } from '../../identity/index.js';
import { STATUS_CODE, TYPE_CODE, TYPE_OF_CODE } from '../../state/schema.js';
import type { EntryUpdate, StoredEntries } from '../../state/types.js';
import { compiledScriptPresent } from '../workers/compiled-script.js';
import { WorkerPool } from '../workers/worker-pool.js';

export type { StoredEntries };

const STATE_THREAD = new URL('./state-thread-entry.js', import.meta.url);

/** What the thread opens: the file the main thread has already opened, checked and locked. */
export interface StateThreadConfig {
  path: string;
  envFingerprint: string;
  api: 'v3' | 'v2';
}

/** The answers of one batch, column by column, as the thread turns them back into EntryUpdates. */
export interface PackedUpdates {
  /** The state file's TYPE_CODE. */
  type: Uint8Array;
  /** The outcome's kind as the state file's STATUS_CODE. */
  kind: Uint8Array;
  hash: string[];
  u: (string | null)[];
  p: (string | null)[];
  /** NaN: none. */
  r: Float64Array;
  bucketId: (string | null)[];
  /** An opt-out's time in ms; NaN: none. */
  optedOutSinceMs: Float64Array;
}

export type StateThreadTask =
  | { op: 'lookup'; type: DiiType; hashes: readonly string[] }
  | { op: 'commit'; updates: PackedUpdates; nowS: number }
  | { op: 'close' };

export type StateThreadAnswer = StoredEntries | null;

/** The updates of a batch as columns; the inverse of unpackUpdates. */
export function packUpdates(updates: readonly EntryUpdate[]): PackedUpdates {
  const n = updates.length;
  const packed: PackedUpdates = {
    type: new Uint8Array(n),
    kind: new Uint8Array(n),
    hash: new Array<string>(n),
    u: new Array<string | null>(n),
    p: new Array<string | null>(n),
    r: new Float64Array(n).fill(Number.NaN),
    bucketId: new Array<string | null>(n),
    optedOutSinceMs: new Float64Array(n).fill(Number.NaN),
  };
  for (let i = 0; i < n; i++) {
    const { type, hash, outcome } = updates[i];
    packed.type[i] = TYPE_CODE[type];
    packed.hash[i] = hash;
    packed.kind[i] = STATUS_CODE[outcome.kind];
    let u: string | null = null;
    let p: string | null = null;
    let bucketId: string | null = null;
    if (outcome.kind === 'mapped') {
      u = outcome.u;
      p = outcome.p ?? null;
      bucketId = outcome.bucketId ?? null;
      if (typeof outcome.r === 'number') packed.r[i] = outcome.r;
    } else if (outcome.kind === 'optout' && typeof outcome.optedOutSinceMs === 'number') {
      packed.optedOutSinceMs[i] = outcome.optedOutSinceMs;
    }
    packed.u[i] = u;
    packed.p[i] = p;
    packed.bucketId[i] = bucketId;
  }
  return packed;
}

/** The EntryUpdates a PackedUpdates holds. */
export function unpackUpdates(packed: PackedUpdates): EntryUpdate[] {
  const n = packed.hash.length;
  const updates = new Array<EntryUpdate>(n);
  for (let i = 0; i < n; i++) {
    const type: DiiType = TYPE_OF_CODE[packed.type[i]];
    const hash = packed.hash[i];
    switch (packed.kind[i]) {
      case STATUS_CODE.mapped: {
        const r = packed.r[i];
        const bucketId = packed.bucketId[i];
        updates[i] = {
          type,
          hash,
          outcome: {
            kind: 'mapped',
            u: packed.u[i] as string,
            p: packed.p[i],
            r: Number.isNaN(r) ? null : r,
            ...(bucketId !== null ? { bucketId } : {}),
          },
        };
        break;
      }
      case STATUS_CODE.optout: {
        const since = packed.optedOutSinceMs[i];
        updates[i] = {
          type,
          hash,
          outcome: Number.isNaN(since) ? { kind: 'optout' } : { kind: 'optout', optedOutSinceMs: since },
        };
        break;
      }
      default:
        updates[i] = { type, hash, outcome: { kind: 'invalid' } };
    }
  }
  return updates;
}

/**
 * The engine's side of the thread. Tasks are answered in the order they were given (one thread, one
 * connection): a lookup sent after a commit sees what it wrote, and close() comes after every commit.
 */
export class StateThread {
  readonly threaded = true;
  private readonly pool: WorkerPool<StateThreadTask, StateThreadAnswer>;

  /** Run from the TypeScript sources (vitest) there is no compiled thread script: the state stays on this thread. */
  static available(): boolean {
    return compiledScriptPresent(STATE_THREAD);
  }

  constructor(config: StateThreadConfig) {
    this.pool = new WorkerPool<StateThreadTask, StateThreadAnswer>({
      script: STATE_THREAD,
      size: 1,
      workerData: config,
      purpose: 'the state file',
      // what the state file said (a full disk, a damaged file) reads as it would on this thread
      revive: (thrown) => Object.assign(new Error(thrown.message), { name: thrown.name }),
    });
  }

  lookupStored(type: DiiType, hashes: readonly string[]): Promise<StoredEntries> {
    return this.pool.run({ op: 'lookup', type, hashes }) as Promise<StoredEntries>;
  }

  async commitBatch(updates: readonly EntryUpdate[], nowS: number): Promise<void> {
    await this.pool.run({ op: 'commit', updates: packUpdates(updates), nowS });
  }

  /** After every task given so far: the thread's connection is closed (checkpointed), then the thread stops. */
  async close(): Promise<void> {
    try {
      await this.pool.run({ op: 'close' });
    } finally {
      await this.pool.close();
    }
  }
}
