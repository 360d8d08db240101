import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServiceClient, UnexpectedResponseError, type ServiceClient } from '../../src/client/index.js';
import { sha256Base64 } from '../../src/identity/index.js';
import { BucketAnswer, bucketIdOf, mappedOutcome } from '../../src/pipeline/map/bucket-answer.js';
import { joinByPosition, mapBatchV2 } from '../../src/pipeline/v2/map-v2.js';
import { isMappedV3, type MapV2Request, type MapV2ResponseBody, type MapV3Item } from '../../src/protocol/index.js';
import { startService, type LocalService } from '../../src/service/index.js';

/** A v2 service in miniature: echoes each value, mapped unless it starts with 'bad' or 'out'; records requests. */
class FakeV2Client {
  readonly requests: MapV2Request[] = [];
  readonly signals: (AbortSignal | undefined)[] = [];

  mapV2(request: MapV2Request, options?: { signal?: AbortSignal }): Promise<MapV2ResponseBody> {
    this.requests.push(request);
    this.signals.push(options?.signal);
    const values = Object.values(request).find((v) => Array.isArray(v) && v.length > 0) as string[];
    const body: MapV2ResponseBody = { mapped: [] };
    const unmapped: NonNullable<MapV2ResponseBody['unmapped']> = [];
    for (const v of values) {
      if (v.startsWith('bad')) unmapped.push({ identifier: v, reason: 'invalid identifier' });
      else if (v.startsWith('out')) unmapped.push({ identifier: v, reason: 'optout' });
      else body.mapped.push({ identifier: v, advertising_id: `U(${v})`, bucket_id: `B(${v})` });
    }
    if (unmapped.length > 0) body.unmapped = unmapped;
    return Promise.resolve(body);
  }
}

function describeItem(item: MapV3Item): string {
  return isMappedV3(item) ? `${item.u}@${bucketIdOf(item)}` : `e:${item.e}`;
}

describe('mapBatchV2: the engines’ batch seam over /v2/identity/map', () => {
  it('sends one request per kind, never two kinds in one request, and joins each answer to its position', async () => {
    const client = new FakeV2Client();
    const signal = new AbortController().signal;
    const body = await mapBatchV2(client)(
      { email_hash: ['e1', 'bad1', 'e2', 'out1', 'e1'], phone_hash: ['out2', 'p1', 'bad2', 'p1'] },
      signal,
    );
    expect(client.requests).toEqual([
      { email_hash: ['e1', 'bad1', 'e2', 'out1', 'e1'] },
      { phone_hash: ['out2', 'p1', 'bad2', 'p1'] },
    ]);
    for (const request of client.requests) expect(Object.values(request).filter((v) => v.length > 0)).toHaveLength(1);
    expect(client.signals).toEqual([signal, signal]);
    expect(body.email_hash.map(describeItem)).toEqual([
      'U(e1)@B(e1)',
      'e:invalid identifier',
      'U(e2)@B(e2)',
      'e:optout',
      'U(e1)@B(e1)',
    ]);
    expect(body.phone_hash.map(describeItem)).toEqual([
      'e:optout',
      'U(p1)@B(p1)',
      'e:invalid identifier',
      'U(p1)@B(p1)',
    ]);
    expect(body.email).toEqual([]);
    expect(body.phone).toEqual([]);
  });

  it('sends nothing for a kind that is absent or empty', async () => {
    const client = new FakeV2Client();
    const body = await mapBatchV2(client)({ email_hash: [], phone: ['+14155550100'] }, new AbortController().signal);
    expect(client.requests).toEqual([{ phone: ['+14155550100'] }]);
    expect(body.phone.map(describeItem)).toEqual(['U(+14155550100)@B(+14155550100)']);
  });

  it('fails the batch when a later kind fails, so no half-answered batch reaches the engine', async () => {
    const client = new FakeV2Client();
    let calls = 0;
    const failing = {
      mapV2: (request: MapV2Request, options?: { signal?: AbortSignal }) =>
        ++calls === 2 ? Promise.reject(new Error('socket hang up')) : client.mapV2(request, options),
    };
    await expect(
      mapBatchV2(failing)({ email_hash: ['e1'], phone_hash: ['p1'] }, new AbortController().signal),
    ).rejects.toThrow('socket hang up');
  });
});

describe('joinByPosition', () => {
  it('gives each copy of a repeated value its own answer, in input order', () => {
    // the same value sent three times: answered twice mapped (different raw IDs, as a rotation between copies would) and once unmapped
    const items = joinByPosition(['x', 'y', 'x', 'x'], {
      mapped: [
        { identifier: 'x', advertising_id: 'U1', bucket_id: 'b' },
        { identifier: 'y', advertising_id: 'U2', bucket_id: 'c' },
        { identifier: 'x', advertising_id: 'U3', bucket_id: 'b' },
      ],
      unmapped: [{ identifier: 'x', reason: 'optout' }],
    });
    expect(items.map(describeItem)).toEqual(['U1@b', 'U2@c', 'U3@b', 'e:optout']);
  });

  it('reads an absent unmapped list as empty', () => {
    expect(
      joinByPosition(['a'], { mapped: [{ identifier: 'a', advertising_id: 'U', bucket_id: 'b' }] }).map(describeItem),
    ).toEqual(['U@b']);
  });

  it('refuses an answer that does not line up with the request instead of pinning raw IDs on the wrong rows', () => {
    const mapped = [{ identifier: 'a', advertising_id: 'U', bucket_id: 'b' }];
    expect(() => joinByPosition(['a', 'b'], { mapped })).toThrow(UnexpectedResponseError);
    expect(() => joinByPosition(['a', 'b'], { mapped })).toThrow(/1 mapped and 0 unmapped items for 2 sent/);
    expect(() => joinByPosition(['b'], { mapped })).toThrow(/item 1 of 1 sent is neither/);
    // out of order: the lists keep input order, so 'b' cannot come before 'a'
    expect(() =>
      joinByPosition(['a', 'b'], {
        mapped: [
          { identifier: 'b', advertising_id: 'U', bucket_id: 'x' },
          { identifier: 'a', advertising_id: 'V', bucket_id: 'y' },
        ],
      }),
    ).toThrow(/neither/);
    expect(() => joinByPosition(['a'], { mapped: [{ identifier: 'a', advertising_id: 'U' } as never] })).toThrow(
      /no advertising_id or bucket_id/,
    );
  });
});

describe('BucketAnswer', () => {
  it('stores the salt bucket and no refresh time; a v3 answer keeps its r and p', () => {
    const answer = new BucketAnswer('U', 'bkt');
    expect(mappedOutcome(answer)).toEqual({ kind: 'mapped', u: 'U', p: null, r: null, bucketId: 'bkt' });
    expect(mappedOutcome({ u: 'U', p: 'P', r: 5 })).toEqual({ kind: 'mapped', u: 'U', p: 'P', r: 5 });
    // compared with any now, a v2 answer is never due by time: its bucket says when
    expect(answer.r > Number.MAX_SAFE_INTEGER).toBe(true);
    expect(bucketIdOf({ u: 'U', p: null, r: 5 })).toBeNull();
    expect(bucketIdOf({ e: 'optout' })).toBeNull();
  });
});

describe('mapBatchV2 against the local service', () => {
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

  it('answers a mixed batch with two v2 requests whose raw IDs equal the v3 answers', async () => {
    const emails = Array.from({ length: 40 }, (_, i) => sha256Base64(`v2-adapter-${i}@example.com`));
    const phones = Array.from({ length: 25 }, (_, i) => sha256Base64(`+1415555${String(1000 + i)}`));
    // an invalid hash in the middle of each kind and a repeat at the end
    const request = {
      email_hash: [...emails.slice(0, 20), 'not-a-hash', ...emails.slice(20), emails[3]],
      phone_hash: [...phones, 'x', phones[0]],
    };
    const before = service.stats();
    const v2 = await mapBatchV2(client)(request, new AbortController().signal);
    const after = service.stats();
    expect((after.requests['/v2/identity/map'] ?? 0) - (before.requests['/v2/identity/map'] ?? 0)).toBe(2);
    const v3 = await client.mapV3(request);
    for (const kind of ['email_hash', 'phone_hash'] as const) {
      expect(v2[kind]).toHaveLength(request[kind].length);
      v2[kind].forEach((item, i) => {
        const expected = v3[kind][i];
        if (isMappedV3(expected)) {
          expect(isMappedV3(item) && item.u).toBe(expected.u);
          expect(bucketIdOf(item)).toMatch(/^[A-Za-z0-9]{10}$/);
        } else {
          expect(item).toEqual({ e: expected.e });
        }
      });
    }
  });
});
