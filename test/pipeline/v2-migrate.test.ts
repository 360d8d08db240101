import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { sha256Base64 } from '../../src/identity/index.js';
import {
  MIGRATION_FINISHED,
  MIGRATION_STARTED,
  migrateToV3,
  migrationInProgress,
} from '../../src/pipeline/v2/migration.js';
import type { MapV3Request, MapV3ResponseBody } from '../../src/protocol/index.js';
import { openState, type EntryUpdate, type StateStore } from '../../src/state/index.js';
import { lookupMany } from '../state/lookups.js';

const NOW_S = 1_790_000_000;
const R = NOW_S + 40 * 86_400;

let dir: string;
let state: StateStore;
let files = 0;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'uid2-v2-migrate-'));
});
afterEach(() => state?.close());
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const hashOf = (i: number): string => sha256Base64(`m-${i}`);
/** The raw ID v3 gives now: the same as the stored v2 one for even entries, a new one for odd ones. */
const v3Uid = (hash: string): string => `V3(${hash.slice(0, 6)})`;

function seed(n: number): StateStore {
  const s = openState(join(dir, `s${++files}.db`), { envFingerprint: 'test', api: 'v2' });
  const updates: EntryUpdate[] = Array.from({ length: n }, (_, i) => ({
    type: i % 4 === 0 ? 'phone' : 'email',
    hash: hashOf(i),
    outcome: { kind: 'mapped', u: i % 2 === 0 ? v3Uid(hashOf(i)) : `v2-${i}`, p: null, r: null, bucketId: `b${i % 7}` },
  }));
  updates.push({ type: 'email', hash: sha256Base64('tombstone'), outcome: { kind: 'optout' } });
  s.commitBatch(updates, NOW_S - 86_400);
  return s;
}

class FakeV3 {
  readonly sent: string[] = [];
  failCall?: number;
  private calls = 0;
  mapBatch = (request: MapV3Request): Promise<MapV3ResponseBody> => {
    if (++this.calls === this.failCall) return Promise.reject(new Error('socket hang up'));
    const answer = (h: string) => {
      this.sent.push(h);
      return { u: v3Uid(h), p: null, r: R };
    };
    return Promise.resolve({
      email: [],
      phone: [],
      email_hash: (request.email_hash ?? []).map(answer),
      phone_hash: (request.phone_hash ?? []).map(answer),
    });
  };
}

describe('migrateToV3', () => {
  it('moves every v2 entry to v3 over resumable runs, never sends one twice, then marks the file v3', async () => {
    state = seed(50);
    const v3 = new FakeV3();
    const first = await migrateToV3({ state, nowS: NOW_S, mapBatch: v3.mapBatch, limit: 20, batchSize: 8 });
    expect(first).toMatchObject({ v2Before: 50, v2Left: 30, finished: false });
    expect(migrationInProgress(state)).toBe(true);
    expect(state.getMeta(MIGRATION_STARTED)).toBe(new Date(NOW_S * 1000).toISOString());
    expect(state.meta().api).toBe('v2');

    const second = await migrateToV3({ state, nowS: NOW_S + 60, mapBatch: v3.mapBatch, batchSize: 8 });
    expect(second).toMatchObject({ v2Before: 30, v2Left: 0, finished: true });
    expect(state.meta().api).toBe('v3');
    expect(state.getMeta(MIGRATION_FINISHED)).not.toBeNull();
    expect(migrationInProgress(state)).toBe(false);
    // the started time is the first run's
    expect(state.getMeta(MIGRATION_STARTED)).toBe(new Date(NOW_S * 1000).toISOString());

    expect(v3.sent).toHaveLength(50);
    expect(new Set(v3.sent).size).toBe(50);
    // the tombstone is not sent: it has no raw UID to migrate
    expect(v3.sent).not.toContain(sha256Base64('tombstone'));
    expect(first.counts.unchanged + second.counts.unchanged).toBe(25);
    expect(first.counts.changed + second.counts.changed).toBe(25);

    const all = lookupMany(
      state,
      Array.from({ length: 50 }, (_, i) => ({
        type: i % 4 === 0 ? ('phone' as const) : ('email' as const),
        hash: hashOf(i),
      })),
    );
    for (const e of all.values()) expect(e).toMatchObject({ bucketId: null, r: R, due: false, u: v3Uid(e.hash) });
  });

  it('keeps a failed batch v2 and the file v2; the next run takes it', async () => {
    state = seed(30);
    const v3 = new FakeV3();
    v3.failCall = 2;
    const failed = await migrateToV3({ state, nowS: NOW_S, mapBatch: v3.mapBatch, batchSize: 10, concurrency: 1 });
    expect(failed).toMatchObject({ v2Left: 10, finished: false });
    expect(failed.counts.batchesFailed).toBe(1);
    expect(state.meta().api).toBe('v2');
    const retry = await migrateToV3({ state, nowS: NOW_S, mapBatch: new FakeV3().mapBatch });
    expect(retry).toMatchObject({ v2Before: 10, v2Left: 0, finished: true });
  });

  it('takes entries mapped with v2 after the migration started', async () => {
    state = seed(10);
    await migrateToV3({ state, nowS: NOW_S, mapBatch: new FakeV3().mapBatch, limit: 4 });
    state.commitBatch(
      [
        {
          type: 'email',
          hash: sha256Base64('late'),
          outcome: { kind: 'mapped', u: 'L', p: null, r: null, bucketId: 'b1' },
        },
      ],
      NOW_S + 10,
    );
    const v3 = new FakeV3();
    const rest = await migrateToV3({ state, nowS: NOW_S + 20, mapBatch: v3.mapBatch });
    expect(rest).toMatchObject({ v2Before: 7, v2Left: 0, finished: true });
    expect(v3.sent).toContain(sha256Base64('late'));
  });
});
