import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Base64 } from '../../src/identity/index.js';
import { startService, type LocalService } from '../../src/service/index.js';
import { body, call } from './helpers.js';

const V3 = '/v3/identity/map';
const V2 = '/v2/identity/map';
const START = Date.UTC(2026, 2, 10, 9, 30, 0);
const REQUIRED_V3 =
  'Required Parameter Missing: one or more of [email, email_hash, phone, phone_hash] must be specified';
const EXACTLY_ONE_V2 =
  'Required Parameter Missing: exactly one of [email, email_hash, phone, phone_hash] must be specified';

interface Mapped {
  u: string;
  p: string | null;
  r: number;
}
type V3Item = Mapped | { e: string };
type V3Body = Record<'email' | 'email_hash' | 'phone' | 'phone_hash', V3Item[]>;
interface V2Body {
  mapped: { identifier: string; advertising_id: string; bucket_id: string }[];
  unmapped?: { identifier: string; reason: string }[];
}

let service: LocalService;
beforeAll(async () => {
  service = await startService({ nowMs: START, maxMapItems: 50 });
});
afterAll(() => service.close());

const mapV3 = (request: unknown) => body<V3Body>(service, V3, request);
const mapV2 = (request: unknown) => body<V2Body>(service, V2, request);
async function errorOf(path: string, request: unknown) {
  const answer = await call(service, path, request);
  expect(answer.status).toBe(400);
  return answer.json;
}

describe('/v3/identity/map', () => {
  it('answers all four arrays, aligned with the request, with u, p (null or string) and r', async () => {
    const result = await mapV3({ email: ['User@Example.com', 'x', 'user@example.com'], phone: ['+12025550123'] });
    expect(Object.keys(result).sort()).toEqual(['email', 'email_hash', 'phone', 'phone_hash']);
    expect(result.email_hash).toEqual([]);
    expect(result.phone_hash).toEqual([]);
    const [first, invalid, same] = result.email as [Mapped, { e: string }, Mapped];
    expect(first.u).toMatch(/^[A-Za-z0-9+/]{43}=$/);
    expect('p' in first).toBe(true);
    expect(first.p === null || /^[A-Za-z0-9+/]{43}=$/.test(first.p)).toBe(true);
    expect(Number.isInteger(first.r)).toBe(true);
    expect(invalid).toEqual({ e: 'invalid identifier' });
    // normalization happens at the service, like the operator
    expect(same).toEqual(first);
    expect((result.phone[0] as Mapped).u).not.toBe(first.u);
  });

  it('a raw value, its base64 hash and its hex hash are the same identity; kinds mix in one request', async () => {
    const hash = sha256Base64('jane.doe@gmail.com'.replace('.', ''));
    const hex = Buffer.from(hash, 'base64').toString('hex');
    const result = await mapV3({ email: ['Jane.Doe+work@GMAIL.com'], email_hash: [hash, hex.toUpperCase()] });
    const [a] = result.email as [Mapped];
    const [b, c] = result.email_hash as [Mapped, Mapped];
    expect(b).toEqual(a);
    expect(c).toEqual(a);
  });

  it('non-canonical base64 (unused bits set) names the same bytes as the canonical text', async () => {
    const hash = sha256Base64('someone@example.com');
    const last = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
    const v = last.indexOf(hash[42]!);
    const loose = `${hash.slice(0, 42)}${last[v | 1]}=`;
    const result = await mapV3({ email_hash: [hash, loose] });
    expect(result.email_hash[1]).toEqual(result.email_hash[0]);
  });

  it('duplicates are answered one by one', async () => {
    const result = await mapV3({ phone: ['+12025550100', '+12025550100'] });
    expect(result.phone).toHaveLength(2);
    expect(result.phone[0]).toEqual(result.phone[1]);
  });

  it('invalid identifiers of each kind', async () => {
    const result = await mapV3({
      email: ['', 'no-at-sign', '@b.com', 'a@ba@z.com'],
      phone: ['12025550100', '+1202555', '+1 202 555 0100', '+1234567890123456'],
      email_hash: ['short', `${sha256Base64('x').slice(0, 43)}`, 'g'.repeat(64)],
      phone_hash: [42, true],
    });
    for (const kind of ['email', 'phone', 'email_hash', 'phone_hash'] as const) {
      for (const item of result[kind]) expect(item).toEqual({ e: 'invalid identifier' });
    }
  });

  it('test identities (operator mapping): optout always, refresh-optout and validate map', async () => {
    const result = await mapV3({
      email: ['optout@example.com', 'refresh-optout@example.com', 'validate@example.com', 'optout@unifiedid.com'],
      phone: ['+00000000000', '+00000000002', '+12345678901'],
      email_hash: [sha256Base64('optout@example.com')],
      phone_hash: [sha256Base64('optout@example.com'), sha256Base64('+00000000000')],
    });
    expect(result.email[0]).toEqual({ e: 'optout' });
    expect(result.email[1]).toHaveProperty('u');
    expect(result.email[2]).toHaveProperty('u');
    expect(result.email[3]).toHaveProperty('u');
    expect(result.phone[0]).toEqual({ e: 'optout' });
    expect(result.phone[1]).toHaveProperty('u');
    expect(result.phone[2]).toHaveProperty('u');
    expect(result.email_hash[0]).toEqual({ e: 'optout' });
    // matching is on (type, hash): an email's hash sent as a phone hash is not the test identity
    expect(result.phone_hash[0]).toHaveProperty('u');
    expect(result.phone_hash[1]).toEqual({ e: 'optout' });
  });

  it('empty or null arrays give four empty arrays', async () => {
    const empty = { email: [], email_hash: [], phone: [], phone_hash: [] };
    expect(await mapV3({ email: [] })).toEqual(empty);
    expect(await mapV3({ email_hash: null })).toEqual(empty);
  });

  it('request format errors', async () => {
    expect(await errorOf(V3, {})).toEqual({ status: 'client_error', message: REQUIRED_V3 });
    for (const bad of [
      { email: ['a@b.com'], policy: 1 },
      { optout_check: 1 },
      { email: 'a@b.com' },
      { email: [null] },
      { email: [['a@b.com']] },
      { email: [{}] },
      { phone_hash: {} },
    ]) {
      expect(await errorOf(V3, bad)).toEqual({ status: 'client_error', message: 'Incorrect request format' });
    }
  });

  it('more items than the cap (all kinds together) is "Request payload is too large"', async () => {
    const emails = Array.from({ length: 30 }, (_, i) => `p${i}@example.com`);
    const phones = Array.from({ length: 21 }, (_, i) => `+1202555${String(i).padStart(4, '0')}`);
    expect(await errorOf(V3, { email: emails, phone: phones })).toEqual({
      status: 'client_error',
      message: 'Request payload is too large',
    });
    const ok = await mapV3({ email: emails, phone: phones.slice(1) });
    expect(ok.email).toHaveLength(30);
  });

  it('the default cap is 5,000 items', async () => {
    const wide = await startService({ nowMs: START });
    try {
      const hashes = Array.from({ length: 5000 }, (_, i) => sha256Base64(`cap${i}@example.com`));
      const ok = await body<V3Body>(wide, V3, { email_hash: hashes }, { mode: 'binary' });
      expect(ok.email_hash).toHaveLength(5000);
      const over = await call(wide, V3, { email_hash: [...hashes, hashes[0]] }, { mode: 'binary' });
      expect(over.json).toEqual({ status: 'client_error', message: 'Request payload is too large' });
    } finally {
      await wide.close();
    }
  });

  it('is deterministic per seed and differs across seeds and scopes', async () => {
    const request = { email: ['det@example.com'] };
    const again = await startService({ nowMs: START });
    const otherSeed = await startService({ nowMs: START, seed: 'another seed' });
    const euid = await startService({ nowMs: START, scope: 'EUID' });
    try {
      const here = ((await mapV3(request)).email[0] as Mapped).u;
      expect(((await body<V3Body>(again, V3, request)).email[0] as Mapped).u).toBe(here);
      expect(((await body<V3Body>(otherSeed, V3, request)).email[0] as Mapped).u).not.toBe(here);
      expect(((await body<V3Body>(euid, V3, request)).email[0] as Mapped).u).not.toBe(here);
    } finally {
      await Promise.all([again.close(), otherSeed.close(), euid.close()]);
    }
  });
});

describe('/v2/identity/map', () => {
  it('mapped and unmapped in input order, identifier echoed verbatim, bucket_id per salt bucket', async () => {
    const v3 = await mapV3({ email: ['A@Example.com', 'b@example.com'] });
    const result = await mapV2({
      email: ['A@Example.com', 'bad', 'optout@example.com', 'b@example.com', 'A@Example.com'],
    });
    expect(result.mapped.map((m) => m.identifier)).toEqual(['A@Example.com', 'b@example.com', 'A@Example.com']);
    expect(result.mapped[0]!.advertising_id).toBe((v3.email[0] as Mapped).u);
    expect(result.mapped[1]!.advertising_id).toBe((v3.email[1] as Mapped).u);
    expect(result.mapped[0]!.bucket_id).toMatch(/^[A-Za-z0-9]{10}$/);
    expect(result.mapped[2]!.bucket_id).toBe(result.mapped[0]!.bucket_id);
    expect(result.unmapped).toEqual([
      { identifier: 'bad', reason: 'invalid identifier' },
      { identifier: 'optout@example.com', reason: 'optout' },
    ]);
  });

  it('hex hashes are echoed as sent', async () => {
    const hex = Buffer.from(sha256Base64('hex@example.com'), 'base64').toString('hex');
    const result = await mapV2({ email_hash: [hex] });
    expect(result.mapped[0]!.identifier).toBe(hex);
  });

  it('omits unmapped when every input mapped; empty arrays give {"mapped":[]}', async () => {
    const result = await mapV2({ phone: ['+12025550111'] });
    expect(result.unmapped).toBeUndefined();
    expect(Object.keys(result)).toEqual(['mapped']);
    expect(await mapV2({ email: [], phone: [] })).toEqual({ mapped: [] });
  });

  it('other keys are ignored when their arrays are empty or they are not identity keys', async () => {
    const result = await mapV2({ email: ['c@example.com'], phone: [], optout_check: 1, policy: 1 });
    expect(result.mapped).toHaveLength(1);
  });

  it('request errors', async () => {
    expect(await errorOf(V2, {})).toEqual({ status: 'client_error', message: EXACTLY_ONE_V2 });
    expect(await errorOf(V2, { optout_check: 1 })).toEqual({ status: 'client_error', message: EXACTLY_ONE_V2 });
    expect(await errorOf(V2, { email: ['a@example.com'], phone: ['+12025550111'] })).toEqual({
      status: 'client_error',
      message: EXACTLY_ONE_V2,
    });
    expect(await errorOf(V2, { email: 'a@example.com' })).toEqual({
      status: 'client_error',
      message: 'email must be an array',
    });
    expect(await errorOf(V2, { phone_hash: {} })).toEqual({
      status: 'client_error',
      message: 'phone_hash must be an array',
    });
    const many = Array.from({ length: 51 }, (_, i) => `v2cap${i}@example.com`);
    expect(await errorOf(V2, { email: many })).toEqual({
      status: 'client_error',
      message: 'Request payload is too large',
    });
  });

  it('a null element is unmapped as "null"', async () => {
    const result = await mapV2({ email: [null, 'd@example.com'] });
    expect(result.unmapped).toEqual([{ identifier: 'null', reason: 'invalid identifier' }]);
    expect(result.mapped).toHaveLength(1);
  });
});
