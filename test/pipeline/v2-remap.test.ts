import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { sha256Base64 } from '../../src/identity/index.js';
import { mapBatchV2 } from '../../src/pipeline/v2/map-v2.js';
import {
  CHANGES_HEADER_V2,
  changeCellsV2,
  RemapEngine,
  type RemapChange,
} from '../../src/pipeline/remap/remap-engine.js';
import type { MapV2Request, MapV2ResponseBody, MapV3Request, MapV3ResponseBody } from '../../src/protocol/index.js';
import { openState, type DueEntry, type EntryUpdate, type StateStore } from '../../src/state/index.js';
import { lookupMany } from '../state/lookups.js';

const NOW_S = 1_790_000_000;

let dir: string;
let state: StateStore;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'uid2-v2-remap-'));
});

afterEach(() => state?.close());

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

let files = 0;
const hashOf = (i: number): string => sha256Base64(`entry-${i}`);
const typeOf = (i: number): 'email' | 'phone' => (i % 3 === 0 ? 'phone' : 'email');
/** The raw ID the fake services give now. */
const currentUid = (hash: string): string => `U(${hash.slice(0, 8)})`;
const keepsUid = (i: number): boolean => Math.floor(i / 4) % 2 === 0;

/**
 * 40 v2 entries in buckets b0..b3, mapped before their bucket rotated. Entries of b1 and b3 rotate; half of them
 * still hold the raw ID the service gives now (a rotation need not change it), the other half an old one.
 */
function seed(): StateStore {
  const s = openState(join(dir, `s${++files}.db`), { envFingerprint: 'test', api: 'v2' });
  const updates: EntryUpdate[] = Array.from({ length: 40 }, (_, i) => ({
    type: typeOf(i),
    hash: hashOf(i),
    outcome: {
      kind: 'mapped',
      u: keepsUid(i) ? currentUid(hashOf(i)) : `old-${i}`,
      p: null,
      r: null,
      bucketId: `b${i % 4}`,
    },
  }));
  s.commitBatch(updates, NOW_S - 86_400);
  s.markBucketsRotated([
    { bucketId: 'b1', lastUpdatedMs: (NOW_S - 3_600) * 1000 },
    { bucketId: 'b3', lastUpdatedMs: (NOW_S - 3_600) * 1000 },
  ]);
  return s;
}

const rotated = Array.from({ length: 40 }, (_, i) => i).filter((i) => i % 4 === 1 || i % 4 === 3);

class FakeV2 {
  readonly requests: MapV2Request[] = [];
  mapV2(request: MapV2Request): Promise<MapV2ResponseBody> {
    this.requests.push(request);
    const values = Object.values(request)[0] as string[];
    return Promise.resolve({
      mapped: values.map((v) => ({ identifier: v, advertising_id: currentUid(v), bucket_id: `n-${v.slice(0, 4)}` })),
    });
  }
}

function selectV2(s: StateStore) {
  return (after: DueEntry | null, limit: number) => s.selectDueV2(after?.id ?? null, limit);
}

describe('RemapEngine on a v2 state', () => {
  it('re-maps exactly the entries of rotated buckets with v2, one kind per request, and clears their mark', async () => {
    state = seed();
    const client = new FakeV2();
    const changes: RemapChange[] = [];
    const engine = new RemapEngine({
      state,
      nowS: NOW_S,
      selectPage: selectV2(state),
      mapBatch: mapBatchV2(client),
      batchSize: 7,
      concurrency: 2,
      onChanges: (c) => void changes.push(...c),
    });
    const result = await engine.run();
    expect(result.outcome).toEqual({ kind: 'completed' });
    const sent = client.requests.flatMap((r) => Object.values(r).flat() as string[]);
    expect(sent.sort()).toEqual(rotated.map(hashOf).sort());
    for (const request of client.requests) expect(Object.keys(request)).toHaveLength(1);
    expect(result.counts).toMatchObject({
      selected: rotated.length,
      changed: rotated.length / 2,
      unchanged: rotated.length / 2,
      stillDue: 0,
    });
    expect(state.countDueV2()).toBe(0);

    const after = lookupMany(
      state,
      Array.from({ length: 40 }, (_, i) => ({ type: typeOf(i), hash: hashOf(i) })),
    );
    for (const i of rotated) {
      const e = after.get(`${typeOf(i)}:${hashOf(i)}`);
      expect(e).toMatchObject({
        u: currentUid(hashOf(i)),
        r: null,
        p: null,
        bucketId: `n-${hashOf(i).slice(0, 4)}`,
        due: false,
        lastMappedS: NOW_S,
      });
    }
    // the changes file lists the changed raw IDs, with their new bucket
    expect(changes.map((c) => c.hash).sort()).toEqual(
      rotated
        .filter((i) => !keepsUid(i))
        .map(hashOf)
        .sort(),
    );
    const one = changes[0];
    expect(changeCellsV2(one)).toEqual([
      one.kind,
      one.hash,
      one.oldRawUid,
      currentUid(one.hash),
      '',
      '',
      'mapped',
      `n-${one.hash.slice(0, 4)}`,
    ]);
    expect(CHANGES_HEADER_V2.at(-1)).toBe('bucket_id');
  });

  it('with a v3 mapper (--upgrade, migrate) turns the entries into v3 entries with r and no bucket', async () => {
    state = seed();
    const requests: MapV3Request[] = [];
    const mapV3 = (request: MapV3Request): Promise<MapV3ResponseBody> => {
      requests.push(request);
      const answer = (h: string) => ({ u: currentUid(h), p: null, r: NOW_S + 30 * 86_400 });
      return Promise.resolve({
        email: [],
        phone: [],
        email_hash: (request.email_hash ?? []).map(answer),
        phone_hash: (request.phone_hash ?? []).map(answer),
      });
    };
    const result = await new RemapEngine({ state, nowS: NOW_S, selectPage: selectV2(state), mapBatch: mapV3 }).run();
    expect(result.counts).toMatchObject({
      selected: rotated.length,
      changed: rotated.length / 2,
      unchanged: rotated.length / 2,
    });
    // v3 takes both kinds in one request
    expect(requests).toHaveLength(1);
    expect(state.countDueV2()).toBe(0);
    expect(state.bucketEntries().count).toBe(40 - rotated.length);
    expect(state.countDue(NOW_S + 30 * 86_400)).toBe(rotated.length);
  });

  it('leaves a failed batch marked due for the next run', async () => {
    state = seed();
    let calls = 0;
    const client = {
      mapV2: (request: MapV2Request) =>
        ++calls === 1 ? Promise.reject(new Error('socket hang up')) : new FakeV2().mapV2(request),
    };
    const result = await new RemapEngine({
      state,
      nowS: NOW_S,
      selectPage: selectV2(state),
      mapBatch: mapBatchV2(client),
      batchSize: 5,
      concurrency: 1,
    }).run();
    expect(result.counts.batchesFailed).toBe(1);
    expect(state.countDueV2()).toBe(5);
  });
});
