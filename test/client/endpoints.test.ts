import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  CLIENT_VERSION,
  RefreshKeyMismatchError,
  UnexpectedResponseError,
  type ClientOptions,
  type ServiceClient,
} from '../../src/client/index.js';
import {
  EnvelopeError,
  ExpiredTokenError,
  InvalidTokenError,
  isMappedV3,
  PATHS,
  ServiceError,
} from '../../src/protocol/index.js';
import { useFakeService } from './fake-service-clients.js';
import { OPTOUT_EMAIL, REFRESH_OPTOUT_EMAIL, VALIDATE_EMAIL } from './fake-service.js';

const fake = useFakeService();
const client = (options: Partial<ClientOptions> = {}): ServiceClient => fake.client(options);

function lastCall() {
  return fake.service.calls[fake.service.calls.length - 1]!;
}

describe.each(['binary', 'text'] as const)('encrypted endpoints in %s mode', (bodyMode) => {
  const contentType = bodyMode === 'binary' ? 'application/octet-stream' : 'text/plain';

  it('mapV3 sends the envelope with bearer auth and client version, and answers index by index', async () => {
    const c = client({ bodyMode });
    const body = await c.mapV3({ email: ['a@example.com', OPTOUT_EMAIL], phone_hash: ['', 'h1'] });
    const call = lastCall();
    expect(call.path).toBe(PATHS.mapV3);
    expect(call.headers.authorization).toBe(`Bearer ${fake.service.apiKey}`);
    expect(call.headers['x-uid2-client-version']).toBe(CLIENT_VERSION);
    expect(call.headers['content-type']).toBe(contentType);
    expect(call.envelope?.binary).toBe(bodyMode === 'binary');
    expect(call.envelope?.payload).toEqual({ email: ['a@example.com', OPTOUT_EMAIL], phone_hash: ['', 'h1'] });
    expect(body.email).toHaveLength(2);
    expect(isMappedV3(body.email[0]!)).toBe(true);
    expect(body.email[1]).toEqual({ e: 'optout' });
    expect(body.phone_hash[0]).toEqual({ e: 'invalid identifier' });
    expect(isMappedV3(body.phone_hash[1]!)).toBe(true);
    expect(body.email_hash).toEqual([]);
    expect(body.phone).toEqual([]);
  });

  it('mapV2 returns mapped, and unmapped only when the service sends it', async () => {
    const c = client({ bodyMode });
    const all = await c.mapV2({ email_hash: ['x', 'y'] });
    expect(all.mapped.map((m) => m.identifier)).toEqual(['x', 'y']);
    expect('unmapped' in all).toBe(false);
    const some = await c.mapV2({ email: ['z@example.com', OPTOUT_EMAIL] });
    expect(some.mapped.map((m) => m.identifier)).toEqual(['z@example.com']);
    expect(some.unmapped).toEqual([{ identifier: OPTOUT_EMAIL, reason: 'optout' }]);
  });

  it('buckets sends since_timestamp and returns the array', async () => {
    const buckets = await client({ bodyMode }).buckets('2026-01-02T00:00:00');
    expect(lastCall().envelope?.payload).toEqual({ since_timestamp: '2026-01-02T00:00:00' });
    expect(buckets).toEqual([{ bucket_id: 'a30od4mNRd', last_updated: '2026-01-02T22:52:03.109' }]);
  });

  it('optoutStatus sends advertising_ids and returns opted_out', async () => {
    const out = await client({ bodyMode }).optoutStatus(['OPTa', 'b', 'OPTc']);
    expect(lastCall().envelope?.payload).toEqual({ advertising_ids: ['OPTa', 'b', 'OPTc'] });
    expect(out.map((o) => o.advertising_id)).toEqual(['OPTa', 'OPTc']);
  });

  it('tokenGenerate gives success with an identity, or optout', async () => {
    const c = client({ bodyMode });
    const ok = await c.tokenGenerate({ email: 'someone@example.com' });
    expect(lastCall().envelope?.payload).toEqual({ email: 'someone@example.com' });
    if (ok.status !== 'success') throw new Error('expected success');
    expect(ok.identity.advertising_token).toMatch(/^A4AT/);
    expect(ok.identity.refresh_from).toBeLessThan(ok.identity.identity_expires);
    expect(await c.tokenGenerate({ email: OPTOUT_EMAIL })).toEqual({ status: 'optout' });
  });

  it('tokenValidate returns the boolean body', async () => {
    const c = client({ bodyMode });
    expect(await c.tokenValidate({ token: 'A4AT1', email: VALIDATE_EMAIL })).toBe(true);
    expect(lastCall().envelope?.payload).toEqual({ token: 'A4AT1', email: VALIDATE_EMAIL });
    expect(await c.tokenValidate({ token: 'A4AT1', email: 'other@example.com' })).toBe(false);
  });
});

describe('envelope checks', () => {
  it('records the service time of the last answer with the local time it arrived', async () => {
    const c = client({ now: () => 5_000_000 });
    expect(c.lastServerTime).toBeUndefined();
    fake.service.script({ kind: 'answer', json: { status: 'success', body: [] }, serverMs: 1_234_567 });
    await c.buckets('2026-01-01T00:00:00');
    expect(c.lastServerTime).toEqual({ serverMs: 1_234_567, localMs: 5_000_000 });
    expect(lastCall().envelope?.timestampMs).toBe(5_000_000);
  });

  it('rejects an answer that echoes another nonce, without retrying it', async () => {
    const c = client();
    fake.service.script({ kind: 'answer', json: { status: 'success', body: [] }, nonce: randomBytes(8) });
    const err = await c.buckets('2026-01-01T00:00:00').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EnvelopeError);
    expect((err as EnvelopeError).code).toBe('nonce-mismatch');
    expect(c.stats.requests).toBe(1);
  });

  it('rejects a 200 whose status the endpoint does not answer with, naming the status', async () => {
    const c = client();
    // only token generate answers insufficient_user_consent (EUID); validate never does
    fake.service.script({ kind: 'answer', json: { status: 'insufficient_user_consent' } });
    const err = await c.tokenValidate({ token: 'A4AT1', email: 'eu@example.com' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UnexpectedResponseError);
    expect((err as UnexpectedResponseError).status).toBe('insufficient_user_consent');
  });

  it('tokenGenerate takes insufficient_user_consent as a result, and no other new status', async () => {
    const c = client();
    fake.service.script({ kind: 'answer', json: { status: 'insufficient_user_consent' } });
    expect(await c.tokenGenerate({ email: 'eu@example.com', tcf_consent_string: 'CPeh' })).toEqual({
      status: 'insufficient_user_consent',
    });
    expect(lastCall().envelope?.payload).toEqual({ email: 'eu@example.com', tcf_consent_string: 'CPeh' });
    fake.service.script({ kind: 'answer', json: { status: 'insufficient_consent' } });
    const err = await c.tokenGenerate({ email: 'eu@example.com' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UnexpectedResponseError);
    expect((err as UnexpectedResponseError).status).toBe('insufficient_consent');
  });

  it('rejects a v3 answer whose arrays do not line up with the request', async () => {
    // one attempt: a malformed answer is otherwise retried, and the next scripted answer would be taken
    const c = client({ maxAttempts: 1 });
    fake.service.script({
      kind: 'answer',
      json: { status: 'success', body: { email: [], email_hash: [], phone: [], phone_hash: [] } },
    });
    await expect(c.mapV3({ email: ['a@example.com'] })).rejects.toThrow(/0 "email" items for 1 sent/);
  });

  it('rejects bodies of the wrong shape', async () => {
    // one attempt: a malformed answer is otherwise retried, and the next scripted answer would be taken
    const c = client({ maxAttempts: 1 });
    fake.service.script(
      { kind: 'answer', json: { status: 'success', body: { opted_out: 'no' } } },
      { kind: 'answer', json: { status: 'success', body: 'yes' } },
      { kind: 'answer', json: { status: 'success', body: { advertising_token: 'x' } } },
    );
    await expect(c.optoutStatus(['a'])).rejects.toBeInstanceOf(UnexpectedResponseError);
    await expect(c.tokenValidate({ token: 't', email: 'e@example.com' })).rejects.toBeInstanceOf(
      UnexpectedResponseError,
    );
    await expect(c.tokenGenerate({ email: 'e@example.com' })).rejects.toThrow(/no "refresh_token"/);
  });

  it('refuses to call an encrypted endpoint without credentials, before any request', async () => {
    const c = client({ apiKey: undefined, clientSecret: undefined });
    await expect(c.mapV3({ email: ['a@example.com'] })).rejects.toThrow(/needs an API key and a client secret/);
    expect(c.stats.requests).toBe(0);
  });

  it('says what is wrong with a malformed client secret without echoing it', () => {
    const secret = 'not-a-secret-value';
    let message = '';
    try {
      client({ clientSecret: secret });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/client secret is not a base64 encoding of 32 bytes/);
    expect(message).not.toContain(secret);
  });

  it('prefixes paths with the base URL path', async () => {
    fake.service.script({ kind: 'status', httpStatus: 404, body: 'Not Found' });
    const c = client({ baseUrl: `${fake.service.url}/prefix/` });
    await expect(c.buckets('2026-01-01T00:00:00')).rejects.toBeInstanceOf(ServiceError);
    expect(lastCall().path).toBe(`/prefix${PATHS.buckets}`);
  });
});

describe('tokenRefresh', () => {
  async function generate(c: ServiceClient, email: string) {
    const result = await c.tokenGenerate({ email });
    if (result.status !== 'success') throw new Error('expected an identity');
    return result.identity;
  }

  it('sends the refresh_token as the body and opens the answer with the matching key', async () => {
    const c = client();
    const first = await generate(c, 'r1@example.com');
    const refreshed = await c.tokenRefresh(first.refresh_token, first.refresh_response_key);
    const call = lastCall();
    expect(call.path).toBe(PATHS.tokenRefresh);
    expect(call.raw.toString('utf8')).toBe(first.refresh_token);
    expect(call.headers.authorization).toBe(`Bearer ${fake.service.apiKey}`);
    if (refreshed.status !== 'success') throw new Error('expected success');
    expect(refreshed.identity.refresh_token).not.toBe(first.refresh_token);
    // and the new pair works for the next refresh
    const again = await c.tokenRefresh(refreshed.identity.refresh_token, refreshed.identity.refresh_response_key);
    expect(again.status).toBe('success');
  });

  it('works without an API key and then sends no Authorization header', async () => {
    const identity = await generate(client(), 'r2@example.com');
    const anonymous = client({ apiKey: undefined, clientSecret: undefined });
    const refreshed = await anonymous.tokenRefresh(identity.refresh_token, identity.refresh_response_key);
    expect(refreshed.status).toBe('success');
    expect(lastCall().headers.authorization).toBeUndefined();
    expect(lastCall().headers['x-uid2-client-version']).toBe(CLIENT_VERSION);
  });

  it('explains that an older refresh_response_key does not belong to the newer token, without showing a key', async () => {
    const c = client();
    const first = await generate(c, 'r3@example.com');
    const second = await c.tokenRefresh(first.refresh_token, first.refresh_response_key);
    if (second.status !== 'success') throw new Error('expected success');
    const err = await c
      .tokenRefresh(second.identity.refresh_token, first.refresh_response_key)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RefreshKeyMismatchError);
    const message = (err as Error).message;
    expect(message).toMatch(/refresh_response_key .*does not belong to this refresh_token/);
    expect(message).not.toContain(first.refresh_response_key);
    expect(message).not.toContain(second.identity.refresh_response_key);
  });

  it('answers optout for an identity that opts out on refresh', async () => {
    const c = client();
    const identity = await generate(c, REFRESH_OPTOUT_EMAIL);
    expect(await c.tokenRefresh(identity.refresh_token, identity.refresh_response_key)).toEqual({ status: 'optout' });
  });

  it('maps invalid and expired tokens to their typed errors, and to status "error" when unauthenticated', async () => {
    const c = client();
    const key = randomBytes(32).toString('base64');
    await expect(c.tokenRefresh('unknown-token', key)).rejects.toBeInstanceOf(InvalidTokenError);
    const identity = await generate(c, 'r4@example.com');
    fake.service.expire(identity.refresh_token);
    await expect(c.tokenRefresh(identity.refresh_token, identity.refresh_response_key)).rejects.toBeInstanceOf(
      ExpiredTokenError,
    );
    const anonymous = client({ apiKey: undefined });
    const err = await anonymous.tokenRefresh('unknown-token', key).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServiceError);
    expect((err as ServiceError).status).toBe('error');
    expect((err as ServiceError).httpStatus).toBe(400);
    expect(anonymous.stats.retries).toBe(0);
  });

  it('rejects a malformed refresh_response_key before sending', async () => {
    const c = client();
    await expect(c.tokenRefresh('RT-x', 'short')).rejects.toThrow(
      /refresh_response_key is not a base64 encoding of 32 bytes/,
    );
    expect(c.stats.requests).toBe(0);
  });
});
