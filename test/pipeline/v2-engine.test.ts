import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { sha256Base64 } from '../../src/identity/index.js';
import { MapEngine } from '../../src/pipeline/map/map-engine.js';
import { mapBatchV2 } from '../../src/pipeline/v2/map-v2.js';
import { outputHeaderV2, outputRowsV2 } from '../../src/pipeline/map/result-columns.js';
import type { MapV2Request, MapV2ResponseBody } from '../../src/protocol/index.js';
import { openState, type StateStore } from '../../src/state/index.js';
import { chunked } from './engine-fakes.js';
import { lookupHashes } from '../state/lookups.js';

const NOW_S = 1_790_000_000;
const OPTED_OUT = sha256Base64('optout@example.com');

/** Maps every hash to U(<hash>) in bucket B(<first char>), except the opted-out one; records requests. */
class FakeV2 {
  readonly requests: MapV2Request[] = [];
  mapV2(request: MapV2Request): Promise<MapV2ResponseBody> {
    this.requests.push(request);
    const values = Object.values(request)[0] as string[];
    const body: MapV2ResponseBody = { mapped: [] };
    for (const v of values) {
      if (v === OPTED_OUT) (body.unmapped ??= []).push({ identifier: v, reason: 'optout' });
      else body.mapped.push({ identifier: v, advertising_id: `U(${v.slice(0, 6)})`, bucket_id: `B${v[0]}` });
    }
    return Promise.resolve(body);
  }
}

let dir: string;
let state: StateStore | undefined;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'uid2-v2-engine-'));
});
afterEach(() => state?.close());
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const COLUMNS = [
  { name: 'email', index: 1, kind: 'email' as const },
  { name: 'phone', index: 2, kind: 'phone' as const },
];

const ROWS = [
  ['1', 'a@example.com', '+14155550101'],
  ['2', 'optout@example.com', 'not a phone'],
  ['3', 'not an email', '+14155550102'],
  ['4', 'A@Example.com ', '+14155550101'],
  ['5', 'b@example.com', ''],
];

async function run(client: FakeV2, s?: StateStore, nowS = NOW_S) {
  const out: string[][] = [];
  const engine = new MapEngine({
    columns: COLUMNS,
    mapBatch: mapBatchV2(client),
    nowS: () => nowS,
    ...(s !== undefined ? { state: s } : {}),
    onChunk: (chunk) => void out.push(...outputRowsV2(chunk, null)),
  });
  const result = await engine.run(
    chunked(
      ROWS.map((r) => [...r]),
      2,
    ),
  );
  return { out, result };
}

describe('MapEngine with the v2 adapter', () => {
  it('writes raw_uid, bucket_id, status, reason per identifier column, rows in input order', async () => {
    const client = new FakeV2();
    const { out, result } = await run(client);
    const e = (email: string) => sha256Base64(email);
    const p = (phone: string) => sha256Base64(phone);
    expect(outputHeaderV2(['id', 'email', 'phone'], COLUMNS)).toEqual([
      'id',
      'email',
      'phone',
      'email_raw_uid',
      'email_bucket_id',
      'email_status',
      'email_reason',
      'phone_raw_uid',
      'phone_bucket_id',
      'phone_status',
      'phone_reason',
    ]);
    const uid = (h: string) => [`U(${h.slice(0, 6)})`, `B${h[0]}`, 'mapped', ''];
    expect(out.map((r) => r.slice(3))).toEqual([
      [...uid(e('a@example.com')), ...uid(p('+14155550101'))],
      ['', '', 'optout', 'optout', '', '', 'invalid', expect.any(String)],
      ['', '', 'invalid', expect.any(String), ...uid(p('+14155550102'))],
      [...uid(e('a@example.com')), ...uid(p('+14155550101'))],
      [...uid(e('b@example.com')), '', '', 'missing', 'empty'],
    ]);
    // one request per kind (the batch held both), each identifier once
    expect(client.requests).toHaveLength(2);
    for (const request of client.requests) expect(Object.keys(request)).toHaveLength(1);
    expect(client.requests.flatMap((r) => Object.values(r).flat()).length).toBe(5);
    expect(result.counts.status).toMatchObject({ mapped: 6, optout: 1, invalid: 2, missing: 1 });
  });

  it('stores the salt bucket and the time, answers from the state until the bucket is marked rotated', async () => {
    state = openState(join(dir, 'v2.db'), { envFingerprint: 'test', api: 'v2' });
    const first = new FakeV2();
    await run(first, state);
    const a = lookupHashes(state, 'email', [sha256Base64('a@example.com')]).get(sha256Base64('a@example.com'));
    expect(a).toMatchObject({
      status: 'mapped',
      r: null,
      p: null,
      bucketId: `B${sha256Base64('a@example.com')[0]}`,
      lastMappedS: NOW_S,
      due: false,
    });
    expect(lookupHashes(state, 'email', [OPTED_OUT]).get(OPTED_OUT)?.status).toBe('optout');

    // a re-run a month later: a v2 entry has no r, so nothing is due by time
    const second = new FakeV2();
    const again = await run(second, state, NOW_S + 30 * 86_400);
    expect(second.requests).toEqual([]);
    expect(again.result.counts.fromState).toBe(7);
    expect(again.out.map((r) => r.slice(3, 5))).toEqual((await run(new FakeV2())).out.map((r) => r.slice(3, 5)));

    // once its bucket rotated after it was mapped, the entry is sent again (and only it)
    expect(
      state.markBucketsRotated([{ bucketId: a?.bucketId as string, lastUpdatedMs: (NOW_S + 86_400) * 1000 }]),
    ).toBeGreaterThan(0);
    const third = new FakeV2();
    await run(third, state, NOW_S + 2 * 86_400);
    const sent = third.requests.flatMap((r) => Object.values(r).flat());
    expect(sent).toContain(sha256Base64('a@example.com'));
    expect(sent.every((h) => h[0] === (a as { bucketId: string }).bucketId.slice(1))).toBe(true);
    expect(state.countDueV2()).toBe(0);
  });
});
