import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { sha256Base64 } from '../../src/identity/index.js';
import { LocalIdentityEngine } from '../../src/service/engine.js';
import { ServiceSetupError, startService, type LocalService } from '../../src/service/index.js';
import { OptoutRegistry } from '../../src/service/optout-registry.js';
import { DAY_MS, admin, body, call } from './helpers.js';

const V3 = '/v3/identity/map';
const V2 = '/v2/identity/map';
const STATUS = '/v2/optout/status';
const START = Date.UTC(2026, 6, 1, 8, 0, 0);

interface Mapped {
  u: string;
  p: string | null;
  r: number;
}
type V3Body = Record<'email' | 'email_hash' | 'phone' | 'phone_hash', (Mapped | { e: string })[]>;
type StatusBody = { opted_out: { advertising_id: string; opted_out_since: number }[] };

const services: LocalService[] = [];
afterEach(async () => {
  await Promise.all(services.splice(0).map((s) => s.close()));
});
async function start(options: Parameters<typeof startService>[0] = {}): Promise<LocalService> {
  const s = await startService({ nowMs: START, ...options });
  services.push(s);
  return s;
}
async function mapOne(s: LocalService, kind: 'email' | 'phone' | 'email_hash' | 'phone_hash', value: string) {
  return (await body<V3Body>(s, V3, { [kind]: [value] }))[kind][0]!;
}
const status = (s: LocalService, ids: unknown[]) => body<StatusBody>(s, STATUS, { advertising_ids: ids });

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'uid2-optout-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('POST /_local/optout and the map endpoints', () => {
  it('an opted-out identity maps to optout (v3 and v2), keyed on the identity whatever its form', async () => {
    const s = await start();
    const before = (await mapOne(s, 'email', 'Leaving@Example.com')) as Mapped;
    expect((await admin(s, '/_local/optout', { email: 'leaving@example.com' })).json).toEqual({ ok: true });
    expect(await mapOne(s, 'email', 'LEAVING@example.com')).toEqual({ e: 'optout' });
    expect(await mapOne(s, 'email_hash', sha256Base64('leaving@example.com'))).toEqual({ e: 'optout' });
    const v2 = await body<{ mapped: unknown[]; unmapped: unknown[] }>(s, V2, {
      email: ['leaving@example.com', 'staying@example.com'],
    });
    expect(v2.unmapped).toEqual([{ identifier: 'leaving@example.com', reason: 'optout' }]);
    expect(v2.mapped).toHaveLength(1);
    // /v2/optout/status knows the raw UID it had
    const since = (await status(s, [before.u])).opted_out;
    expect(since).toHaveLength(1);
    expect(since[0]!.advertising_id).toBe(before.u);
    expect(since[0]!.opted_out_since % 1000).toBe(0);
    expect(Math.abs(since[0]!.opted_out_since - s.nowMs())).toBeLessThan(5_000);
  });

  it('the opt-out survives salt rotation', async () => {
    const s = await start();
    await admin(s, '/_local/optout', { phone: '+14155550100' });
    await admin(s, '/_local/clock', { advance_days: 400 });
    expect(await mapOne(s, 'phone', '+14155550100')).toEqual({ e: 'optout' });
  });

  it('since_ms is kept at second granularity; the earliest opt-out wins', async () => {
    const s = await start();
    const u = ((await mapOne(s, 'phone_hash', sha256Base64('+14155550101'))) as Mapped).u;
    await admin(s, '/_local/optout', { phone_hash: sha256Base64('+14155550101'), since_ms: 1_700_000_000_999 });
    await admin(s, '/_local/optout', { phone: '+14155550101', since_ms: 1_800_000_000_000 });
    expect((await status(s, [u])).opted_out).toEqual([{ advertising_id: u, opted_out_since: 1_700_000_000_000 }]);
  });

  it('an advertising_id opt-out is reported, and opts out any DII whose current or previous raw UID it is', async () => {
    const s = await start();
    const list = Array.from({ length: 600 }, (_, i) => `adid${i}@example.com`);
    const mapped = (await body<V3Body>(s, V3, { email: list }, { mode: 'binary' })).email as Mapped[];
    const soonest = mapped.reduce((a, b) => (b.r < a.r ? b : a));
    const id = list[mapped.indexOf(soonest)]!;
    expect((await admin(s, '/_local/optout', { advertising_id: soonest.u, since_ms: START })).json).toEqual({
      ok: true,
    });
    expect(await mapOne(s, 'email', id)).toEqual({ e: 'optout' });
    expect((await status(s, [soonest.u])).opted_out).toEqual([{ advertising_id: soonest.u, opted_out_since: START }]);
    // after its bucket rotates the DII has a new raw UID, but its previous one is still the opted-out one
    await admin(s, '/_local/clock', { set: soonest.r * 1000 + 1_000 });
    expect(await mapOne(s, 'email', id)).toEqual({ e: 'optout' });
    // others are untouched
    expect(await mapOne(s, 'email', list.find((e) => e !== id)!)).toHaveProperty('u');
  });

  it('test identities keep their fixed behaviour whatever the registry says', async () => {
    const s = await start();
    await admin(s, '/_local/optout', { email: 'validate@example.com' });
    expect(await mapOne(s, 'email', 'validate@example.com')).toHaveProperty('u');
  });

  it('refuses malformed requests with a message and no echo of the value', async () => {
    const s = await start();
    for (const bad of [
      {},
      { email: 'a@example.com', phone: '+14155550100' },
      { email: 'not-an-email' },
      { phone: '555-0100' },
      { email_hash: 'short' },
      { advertising_id: 'x' },
      { email: 42 },
      { email: 'a@example.com', since_ms: -1 },
      { email: 'a@example.com', since_ms: 1.5 },
      { user: 'a@example.com' },
    ]) {
      const answer = await admin(s, '/_local/optout', bad);
      expect(answer.status).toBe(400);
      expect(answer.json.status).toBe('client_error');
      expect(String(answer.json.message)).not.toContain('not-an-email');
    }
    const notJson = await admin(s, '/_local/optout', 'plain');
    expect(notJson.status).toBe(400);
  });
});

describe('/v2/optout/status', () => {
  it('answers only opted-out ids, in input order, with duplicates; unknown strings are simply absent', async () => {
    const s = await start();
    const a = ((await mapOne(s, 'email', 'status-a@example.com')) as Mapped).u;
    const b = ((await mapOne(s, 'email', 'status-b@example.com')) as Mapped).u;
    await admin(s, '/_local/optout', { email: 'status-b@example.com', since_ms: START - DAY_MS });
    await admin(s, '/_local/optout', { email: 'status-a@example.com', since_ms: START });
    const answer = await status(s, ['nobody', b, 'x'.repeat(44), a, b, null]);
    expect(answer.opted_out).toEqual([
      { advertising_id: b, opted_out_since: START - DAY_MS },
      { advertising_id: a, opted_out_since: START },
      { advertising_id: b, opted_out_since: START - DAY_MS },
    ]);
    expect(await status(s, [])).toEqual({ opted_out: [] });
  });

  it('request errors', async () => {
    const s = await start();
    const err = (message: string) => ({ status: 'client_error', message });
    expect((await call(s, STATUS, '')).json).toEqual(err('Invalid request body'));
    expect((await call(s, STATUS, {})).json).toEqual(err('Required Parameter Missing: advertising_ids'));
    expect((await call(s, STATUS, { advertising_ids: null })).json).toEqual(
      err('Required Parameter Missing: advertising_ids'),
    );
    expect((await call(s, STATUS, { advertising_ids: Array(5001).fill('a') })).json).toEqual(
      err('Request payload is too large'),
    );
    expect((await call(s, STATUS, { advertising_ids: Array(5000).fill('a') })).status).toBe(200);
    expect((await call(s, STATUS, { advertising_ids: 'abc' })).status).toBe(400);
    expect((await call(s, STATUS, { advertising_ids: [1, 2] })).status).toBe(400);
  });
});

describe('--optout-file', () => {
  it('opts out every non-empty cell of any identity column, since since_ms or the start time', async () => {
    const probe = await start();
    const adid = ((await mapOne(probe, 'email', 'by-adid@example.com')) as Mapped).u;
    const fileU = ((await mapOne(probe, 'phone', '+14155550102')) as Mapped).u;
    const file = join(dir, 'optouts.csv');
    writeFileSync(
      file,
      [
        'Email,phone,email_hash,advertising_id,since_ms',
        'file-a@example.com,,,,',
        `,+14155550102,${sha256Base64('file-c@example.com')},,1700000000000`,
        `,,,${adid},`,
        '',
      ].join('\r\n'),
    );
    const s = await start({ optoutFile: file });
    expect(await mapOne(s, 'email', 'file-a@example.com')).toEqual({ e: 'optout' });
    expect(await mapOne(s, 'phone', '+14155550102')).toEqual({ e: 'optout' });
    expect(await mapOne(s, 'email', 'file-c@example.com')).toEqual({ e: 'optout' });
    expect(await mapOne(s, 'email', 'by-adid@example.com')).toEqual({ e: 'optout' });
    expect(await mapOne(s, 'email', 'file-z@example.com')).toHaveProperty('u');
    const found = (await status(s, [fileU, adid])).opted_out;
    expect(found).toEqual([
      { advertising_id: fileU, opted_out_since: 1_700_000_000_000 },
      { advertising_id: adid, opted_out_since: Math.floor(START / 1000) * 1000 },
    ]);
  });

  it.each([
    ['unknown column', 'email,name\na@example.com,x\n', /unknown column "name"/],
    ['no identity column', 'since_ms\n1\n', /no identity column/],
    ['empty', '', /is empty/],
    ['bad cell', 'email\nsecret-person-at-example.com\n', /line 2: email: invalid email/],
    ['bad since', 'email,since_ms\na@example.com,yesterday\n', /line 2: since_ms must be whole Unix milliseconds/],
    ['ragged', 'email,phone\na@example.com\n', /not valid CSV/],
  ])('refuses a file with %s, without repeating its cells', async (_name, content, message) => {
    const file = join(dir, `bad-${_name.replace(/\s/g, '-')}.csv`);
    writeFileSync(file, content);
    const failure = await startService({ optoutFile: file }).then(
      (s) => {
        services.push(s);
        return null;
      },
      (err: unknown) => err,
    );
    expect(failure).toBeInstanceOf(ServiceSetupError);
    expect((failure as Error).message).toMatch(message);
    expect((failure as Error).message).not.toContain('secret-person');
  });

  it('a missing file says so', async () => {
    await expect(startService({ optoutFile: join(dir, 'nope.csv') })).rejects.toThrow(
      /cannot read the opt-out file .*nope\.csv \(ENOENT\)/,
    );
  });
});

describe('engine view for the token part', () => {
  it('isOptedOut follows test identities, F-keyed opt-outs and advertising_id opt-outs', () => {
    const engine = new LocalIdentityEngine('engine-test', 'UID2', new OptoutRegistry());
    const hashOf = (v: string) => sha256Base64(v);
    const f = (v: string) => engine.firstLevelHash(hashOf(v));
    expect(engine.isOptedOut('email', hashOf('optout@example.com'), f('optout@example.com'), START)).toBe(true);
    expect(engine.isOptedOut('phone', hashOf('optout@example.com'), f('optout@example.com'), START)).toBe(false);
    expect(engine.testIdentity('phone', hashOf('+00000000002'))).toBe('refresh-optout');
    expect(engine.testIdentity('email', hashOf('+00000000002'))).toBeNull();
    expect(engine.isOptedOut('email', hashOf('x@example.com'), f('x@example.com'), START)).toBe(false);
    engine.optOutIdentity(hashOf('x@example.com'), START, START);
    // refresh only has F: an empty hash still finds the F-keyed opt-out
    expect(engine.isOptedOut('email', '', f('x@example.com'), START)).toBe(true);
    const yF = f('y@example.com');
    engine.optOutAdvertisingId(engine.rawUid('email', yF, START), START);
    expect(engine.isOptedOut('email', '', yF, START)).toBe(true);
    expect(engine.firstLevelHash(hashOf('y@example.com'))).toHaveLength(32);
    expect(engine.rawUid('email', yF, START)).toMatch(/^[A-Za-z0-9+/]{43}=$/);
  });
});
