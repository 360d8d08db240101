import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createServiceClient, UnexpectedResponseError, type ServiceClient } from '../../src/client/index.js';
import { sha256Base64 } from '../../src/identity/index.js';
import {
  CHECK_OVERLAP_MS,
  checkRotatedBuckets,
  fetchRotatedBuckets,
  lastCheckMs,
  nextCheckSinceMs,
  parseLastUpdated,
  sinceTimestamp,
} from '../../src/pipeline/v2/rotated-buckets.js';
import type { SaltBucket } from '../../src/protocol/index.js';
import { startService, type LocalService } from '../../src/service/index.js';
import { openState, type EntryUpdate, type StateStore } from '../../src/state/index.js';

const DAY_MS = 86_400_000;
const MAPPED_AT_S = 1_790_000_000;

let dir: string;
const open: StateStore[] = [];

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'uid2-v2-buckets-'));
});

afterEach(() => {
  for (const s of open.splice(0)) s.close();
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

let files = 0;
function v2State(): StateStore {
  const s = openState(join(dir, `s${++files}.db`), { envFingerprint: 'test', api: 'v2' });
  open.push(s);
  return s;
}

function v2Entry(i: number, bucketId: string): EntryUpdate {
  return {
    type: 'email',
    hash: sha256Base64(`v2-${i}`),
    outcome: { kind: 'mapped', u: sha256Base64(`u-${i}`), p: null, r: null, bucketId },
  };
}

/** Answers a fixed bucket list and records what it was asked. */
function fakeBuckets(list: SaltBucket[]) {
  const asked: string[] = [];
  return {
    asked,
    buckets(since: string): Promise<SaltBucket[]> {
      asked.push(since);
      return Promise.resolve(list);
    },
  };
}

describe('since_timestamp and last_updated', () => {
  it('sends the zone-less UTC local date-time the service requires, floored to the second', () => {
    expect(sinceTimestamp(Date.UTC(2026, 10, 1, 0, 0, 0))).toBe('2026-11-01T00:00:00');
    expect(sinceTimestamp(Date.UTC(2026, 10, 1, 13, 5, 9, 999))).toBe('2026-11-01T13:05:09');
  });

  it('reads last_updated as UTC whatever the machine’s zone, and refuses other forms', () => {
    expect(parseLastUpdated('2022-06-05T22:52:03.109')).toBe(Date.UTC(2022, 5, 5, 22, 52, 3, 109));
    expect(parseLastUpdated('2022-06-05T22:52:03')).toBe(Date.UTC(2022, 5, 5, 22, 52, 3));
    expect(parseLastUpdated('2022-06-05T22:52:03.1Z')).toBe(Date.UTC(2022, 5, 5, 22, 52, 3, 100));
    expect(parseLastUpdated('2022-06-05')).toBeNull();
    expect(parseLastUpdated('1654469523109')).toBeNull();
    expect(parseLastUpdated('2022-06-05T22:52:03+02:00')).toBeNull();
  });

  it('refuses a bucket list with an item it cannot read', async () => {
    const client = fakeBuckets([{ bucket_id: 'b1', last_updated: 'yesterday' }]);
    await expect(fetchRotatedBuckets(client, 0)).rejects.toThrow(UnexpectedResponseError);
  });
});

describe('the state’s v2 entries', () => {
  it('counts mapped v2 entries and their oldest mapping; marks only v2 entries due for a migration', () => {
    const s = v2State();
    expect(s.bucketEntries()).toEqual({ count: 0, oldestMappedS: null });
    s.commitBatch([v2Entry(1, 'b1'), v2Entry(2, 'b2')], MAPPED_AT_S);
    s.commitBatch([v2Entry(3, 'b1')], MAPPED_AT_S + 50);
    // already moved to v3, and a tombstone: neither is a v2 entry
    s.commitBatch(
      [{ type: 'phone', hash: sha256Base64('v3'), outcome: { kind: 'mapped', u: 'U', p: null, r: MAPPED_AT_S + 9 } }],
      MAPPED_AT_S - 100,
    );
    s.commitBatch([{ type: 'phone', hash: sha256Base64('gone'), outcome: { kind: 'optout' } }], MAPPED_AT_S - 200);
    expect(s.bucketEntries()).toEqual({ count: 3, oldestMappedS: MAPPED_AT_S });
    expect(s.markBucketEntriesDue()).toBe(3);
    expect(s.markBucketEntriesDue()).toBe(0);
    expect(s.selectDueV2(null, 10).map((e) => e.bucketId)).toEqual(['b1', 'b2', 'b1']);
  });
});

describe('checkRotatedBuckets', () => {
  it('first asks from the oldest mapping, marks entries mapped before their bucket rotated, records the check', async () => {
    const s = v2State();
    s.commitBatch([v2Entry(1, 'b1'), v2Entry(2, 'b2'), v2Entry(3, 'b3')], MAPPED_AT_S);
    const since = nextCheckSinceMs(s);
    expect(since).toBe(MAPPED_AT_S * 1000);
    const client = fakeBuckets([
      { bucket_id: 'b1', last_updated: new Date((MAPPED_AT_S + 3_600) * 1000).toISOString().slice(0, 23) },
      // rotated before the mapping: the raw ID is already the new one
      { bucket_id: 'b2', last_updated: new Date((MAPPED_AT_S - 1) * 1000).toISOString().slice(0, 23) },
    ]);
    const checkedAtMs = (MAPPED_AT_S + 86_400) * 1000;
    const check = await checkRotatedBuckets({ client, state: s, sinceMs: since as number, checkedAtMs });
    expect(client.asked).toEqual([sinceTimestamp(MAPPED_AT_S * 1000)]);
    expect(check).toMatchObject({ marked: 1, recorded: true });
    expect(check.buckets.map((b) => b.bucketId)).toEqual(['b1', 'b2']);
    expect(s.selectDueV2(null, 10).map((e) => e.bucketId)).toEqual(['b1']);
    expect(lastCheckMs(s)).toBe(checkedAtMs - CHECK_OVERLAP_MS);
    // the next check asks from the recorded one
    expect(nextCheckSinceMs(s)).toBe(checkedAtMs - CHECK_OVERLAP_MS);
  });

  it('does not record a check that started after the last one (the stretch between was not asked)', async () => {
    const s = v2State();
    s.commitBatch([v2Entry(1, 'b1')], MAPPED_AT_S);
    const later = (MAPPED_AT_S + 10 * 86_400) * 1000;
    const check = await checkRotatedBuckets({
      client: fakeBuckets([]),
      state: s,
      sinceMs: later,
      checkedAtMs: later + DAY_MS,
    });
    expect(check.recorded).toBe(false);
    expect(lastCheckMs(s)).toBeNull();
    // an earlier check is recorded; a later one never moves the record back
    await checkRotatedBuckets({
      client: fakeBuckets([]),
      state: s,
      sinceMs: MAPPED_AT_S * 1000,
      checkedAtMs: later + DAY_MS,
    });
    expect(lastCheckMs(s)).toBe(later + DAY_MS - CHECK_OVERLAP_MS);
    await checkRotatedBuckets({ client: fakeBuckets([]), state: s, sinceMs: MAPPED_AT_S * 1000, checkedAtMs: later });
    expect(lastCheckMs(s)).toBe(later + DAY_MS - CHECK_OVERLAP_MS);
  });

  it('reads a recorded check written without a zone as UTC', () => {
    const s = v2State();
    s.setMeta('last_buckets_check', '2025-01-01T00:00:00');
    expect(lastCheckMs(s)).toBe(Date.UTC(2025, 0, 1));
  });
});

describe('fetchRotatedBuckets against the local service', () => {
  let service: LocalService;
  let client: ServiceClient;

  beforeAll(async () => {
    service = await startService();
    client = createServiceClient({ baseUrl: service.url, apiKey: service.apiKey, clientSecret: service.clientSecret });
  });

  afterAll(async () => {
    await client?.close();
    await service?.close();
  });

  it('lists nothing since now, then the buckets of each simulated day once the clock has moved', async () => {
    const now = service.nowMs();
    // rotations happen at 00:00 UTC: nothing rotates between now and the next midnight
    expect(await fetchRotatedBuckets(client, now)).toEqual([]);
    const res = await fetch(`${service.url}/_local/clock`, {
      method: 'POST',
      body: JSON.stringify({ advance_days: 3 }),
    });
    expect(res.status).toBe(200);
    const rotated = await fetchRotatedBuckets(client, now);
    const days = new Set(rotated.map((b) => b.lastUpdatedMs));
    expect(days.size).toBe(3);
    for (const d of days) expect(d % DAY_MS).toBe(0);
    expect(Math.min(...days)).toBeGreaterThan(now);
    // about 1/365 of the 2^20 buckets a day
    expect(rotated.length).toBeGreaterThan((3 * 2 ** 20) / 365 / 1.2);
    expect(rotated.length).toBeLessThan((3 * 2 ** 20 * 1.2) / 365);
    expect(new Set(rotated.map((b) => b.bucketId)).size).toBe(rotated.length);
  });
});
