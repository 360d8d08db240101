// Every item of a 200 answer is held to the wire contract: a malformed one is retried like a 5xx, then refused.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { MalformedAnswerError, type ClientOptions, type ServiceClient } from '../../src/client/index.js';
import { useFakeService } from './fake-service-clients.js';

const fake = useFakeService({ maxAttempts: 2 });
const client = (options: Partial<ClientOptions> = {}): ServiceClient => fake.client(options);

const RAW_UID = createHash('sha256').update('a raw UID').digest('base64');
const PREV_UID = createHash('sha256').update('a previous raw UID').digest('base64');
/** 33 bytes: the newer raw UID format, 44 characters with no padding. */
const RAW_UID_33 = Buffer.alloc(33, 0xa0).toString('base64');
const NOW_S = Math.floor(Date.now() / 1000);
const GOOD_R = NOW_S + 86_400;

const answer = (body: unknown) => ({ kind: 'answer', json: { status: 'success', body } }) as const;
const v3Body = (item: unknown) => answer({ email: [], email_hash: [item], phone: [], phone_hash: [] });
const SENT_HASH = createHash('sha256').update('someone@example.com').digest('base64');

/** Items that break the v3 contract, each with a value the error message must not repeat. */
const MALFORMED_V3: [string, unknown][] = [
  ['an empty object', {}],
  ['null', null],
  ['a string', 'u'],
  ['an array', [RAW_UID]],
  ['an empty u', { u: '', p: null, r: GOOD_R }],
  ['a numeric u', { u: 12345, p: null, r: GOOD_R }],
  ['a u too short for a raw UID', { u: 'c2hvcnQ=', p: null, r: GOOD_R }],
  ['a u outside base64', { u: `${RAW_UID.slice(0, 40)}!!!!`, p: null, r: GOOD_R }],
  ['a p that is not a raw UID', { u: RAW_UID, p: 'not-a-raw-uid', r: GOOD_R }],
  ['a p that is a number', { u: RAW_UID, p: 7, r: GOOD_R }],
  ['no p at all', { u: RAW_UID, r: GOOD_R }],
  ['no r', { u: RAW_UID, p: null }],
  ['r as a string', { u: RAW_UID, p: null, r: String(GOOD_R) }],
  ['a negative r', { u: RAW_UID, p: null, r: -GOOD_R }],
  ['a fractional r', { u: RAW_UID, p: null, r: GOOD_R + 0.5 }],
  ['an absurd r', { u: RAW_UID, p: null, r: 1e300 }],
  ['r in milliseconds', { u: RAW_UID, p: null, r: GOOD_R * 1000 }],
  ['r of 0', { u: RAW_UID, p: null, r: 0 }],
  ['an unknown e', { e: 'unknown' }],
  ['a numeric e', { e: 3 }],
  ['both u and e', { u: RAW_UID, p: null, r: GOOD_R, e: 'optout' }],
];

describe('v3 map items', () => {
  it.each(MALFORMED_V3)('%s is retried, and the honest answer that follows is taken', async (_name, item) => {
    const c = client();
    fake.service.script(v3Body(item));
    const body = await c.mapV3({ email_hash: [SENT_HASH] });
    expect(body.email_hash).toHaveLength(1);
    expect(body.email_hash[0]).toMatchObject({ p: null, r: 1_900_000_000 });
    expect(c.stats).toMatchObject({ requests: 2, retries: 1 });
  });

  it.each(MALFORMED_V3)('%s on every attempt is a MalformedAnswerError that names no value', async (_name, item) => {
    const c = client();
    fake.service.script(v3Body(item), v3Body(item));
    const err = await c.mapV3({ email_hash: [SENT_HASH] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MalformedAnswerError);
    const error = err as MalformedAnswerError;
    expect(error.retryable).toBe(true);
    expect(error.message).toMatch(
      /^malformed answer from http:\/\/127\.0\.0\.1:\d+\/v3\/identity\/map: email_hash item 1 /,
    );
    expect(error.message).not.toContain(RAW_UID.slice(0, 12));
    expect(error.message).not.toContain(SENT_HASH.slice(0, 12));
    expect(error.message).not.toContain(String(GOOD_R).slice(0, 6));
    expect(c.stats).toMatchObject({ requests: 2, retries: 1 });
  });

  it('takes every item the contract allows: 32- and 33-byte raw UIDs, p null or a raw UID, optout, invalid', async () => {
    const c = client();
    const items = [
      { u: RAW_UID, p: null, r: GOOD_R },
      { u: RAW_UID_33, p: PREV_UID, r: GOOD_R },
      { e: 'optout' },
      { e: 'invalid identifier' },
    ];
    fake.service.script(answer({ email: [], email_hash: items, phone: [], phone_hash: [] }));
    const body = await c.mapV3({ email_hash: [SENT_HASH, SENT_HASH, SENT_HASH, SENT_HASH] });
    expect(body.email_hash).toEqual(items);
    expect(c.stats).toMatchObject({ requests: 1, retries: 0 });
  });

  it('a body of the wrong shape is retried too', async () => {
    const c = client();
    fake.service.script(answer({ email: [], email_hash: [], phone: [], phone_hash: [] }), answer('nothing'));
    const err = await c.mapV3({ email_hash: [SENT_HASH] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MalformedAnswerError);
    expect(c.stats).toMatchObject({ requests: 2, retries: 1 });
  });
});

const MALFORMED_V2: [string, unknown][] = [
  ['a null mapped item', { mapped: [null] }],
  [
    'an advertising_id that is not a raw UID',
    { mapped: [{ identifier: 'x', advertising_id: 'short', bucket_id: 'b1' }] },
  ],
  ['a numeric advertising_id', { mapped: [{ identifier: 'x', advertising_id: 5, bucket_id: 'b1' }] }],
  ['an empty bucket_id', { mapped: [{ identifier: 'x', advertising_id: RAW_UID, bucket_id: '' }] }],
  ['no bucket_id', { mapped: [{ identifier: 'x', advertising_id: RAW_UID }] }],
  ['an unknown reason', { mapped: [], unmapped: [{ identifier: 'x', reason: 'gone' }] }],
  ['no reason', { mapped: [], unmapped: [{ identifier: 'x' }] }],
  ['another identifier echoed', { mapped: [{ identifier: 'y', advertising_id: RAW_UID, bucket_id: 'b1' }] }],
  [
    'one item too many',
    {
      mapped: [{ identifier: 'x', advertising_id: RAW_UID, bucket_id: 'b1' }],
      unmapped: [{ identifier: 'x', reason: 'optout' }],
    },
  ],
];

describe('v2 map items', () => {
  it.each(MALFORMED_V2)('%s is retried, then refused', async (_name, body) => {
    const c = client();
    fake.service.script(answer(body), answer(body));
    const err = await c.mapV2({ email_hash: ['x'] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MalformedAnswerError);
    expect((err as Error).message).toMatch(/^malformed answer from .*\/v2\/identity\/map: /);
    expect(c.stats).toMatchObject({ requests: 2, retries: 1 });
  });

  it('takes a well-formed answer, unmapped reasons included', async () => {
    const c = client();
    const body = {
      mapped: [{ identifier: 'x', advertising_id: RAW_UID, bucket_id: 'a30od4mNRd' }],
      unmapped: [
        { identifier: 'y', reason: 'optout' },
        { identifier: 'z', reason: 'invalid identifier' },
      ],
    };
    fake.service.script(answer(body));
    expect(await c.mapV2({ email_hash: ['y', 'x', 'z'] })).toEqual(body);
  });
});

const NOW_MS = Date.now();
const MALFORMED_OPTOUT: [string, unknown][] = [
  ['a null item', [null]],
  ['an advertising_id that was not sent', [{ advertising_id: 'OPTother', opted_out_since: NOW_MS }]],
  ['a numeric advertising_id', [{ advertising_id: 5, opted_out_since: NOW_MS }]],
  ['no opted_out_since', [{ advertising_id: 'OPTa' }]],
  ['opted_out_since as a string', [{ advertising_id: 'OPTa', opted_out_since: String(NOW_MS) }]],
  ['a negative opted_out_since', [{ advertising_id: 'OPTa', opted_out_since: -1 }]],
  ['a fractional opted_out_since', [{ advertising_id: 'OPTa', opted_out_since: NOW_MS + 0.5 }]],
  ['an absurd opted_out_since', [{ advertising_id: 'OPTa', opted_out_since: 1e300 }]],
];

describe('opt-out status items', () => {
  it.each(MALFORMED_OPTOUT)('%s is retried, then refused', async (_name, items) => {
    const c = client();
    fake.service.script(answer({ opted_out: items }), answer({ opted_out: items }));
    const err = await c.optoutStatus(['OPTa', 'b']).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MalformedAnswerError);
    expect((err as Error).message).not.toContain('OPTother');
    expect(c.stats).toMatchObject({ requests: 2, retries: 1 });
  });
});

describe('token identities', () => {
  it.each([
    ['negative', -1],
    ['fractional', NOW_MS + 0.5],
    ['absurd', 1e300],
  ])('a %s identity time is retried, then refused', async (_name, time) => {
    const c = client();
    const identity = {
      advertising_token: 'A4AT',
      refresh_token: 'RT',
      identity_expires: time,
      refresh_expires: NOW_MS + 86_400_000,
      refresh_from: NOW_MS + 900_000,
      refresh_response_key: Buffer.alloc(32, 1).toString('base64'),
    };
    fake.service.script(answer(identity), answer(identity));
    const err = await c.tokenGenerate({ email: 'someone@example.com' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MalformedAnswerError);
    expect(c.stats).toMatchObject({ requests: 2, retries: 1 });
  });
});

const MALFORMED_BUCKETS: [string, unknown][] = [
  ['a null bucket', [null]],
  ['an empty bucket_id', [{ bucket_id: '', last_updated: '2026-01-02T22:52:03.109' }]],
  ['a numeric bucket_id', [{ bucket_id: 7, last_updated: '2026-01-02T22:52:03.109' }]],
  ['no last_updated', [{ bucket_id: 'a30od4mNRd' }]],
  ['a last_updated with a zone', [{ bucket_id: 'a30od4mNRd', last_updated: '2026-01-02T22:52:03.109Z' }]],
  ['a last_updated that is no date', [{ bucket_id: 'a30od4mNRd', last_updated: 'yesterday' }]],
  ['a last_updated in milliseconds', [{ bucket_id: 'a30od4mNRd', last_updated: 1_767_394_323_109 }]],
];

describe('salt buckets', () => {
  it.each(MALFORMED_BUCKETS)('%s is retried, then refused', async (_name, body) => {
    const c = client();
    fake.service.script(answer(body), answer(body));
    const err = await c.buckets('2026-01-01T00:00:00').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MalformedAnswerError);
    expect((err as Error).message).toMatch(/^malformed answer from .*\/v2\/identity\/buckets: bucket 1 /);
    expect(c.stats).toMatchObject({ requests: 2, retries: 1 });
  });
});
