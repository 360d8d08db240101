// generateToken with a TCF consent string against an EUID local service, imported as a user imports the package.
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import {
  ArgumentError,
  ClientError,
  type GenerateTokenOptions,
  type GenerateTokenResult,
  IdentityClient,
  type LocalServiceHandle,
  startLocalService,
  type TokenIdentity,
} from 'uid2-batch';
import { FULL_GRANTS, PYTHON_CLIENT_TC_STRING, tcString } from '../helpers/tc-strings.js';

let euid: LocalServiceHandle;
let uid2: LocalServiceHandle;
let client: IdentityClient;
let uid2Client: IdentityClient;

beforeAll(async () => {
  [euid, uid2] = await Promise.all([startLocalService({ scope: 'EUID' }), startLocalService()]);
  client = new IdentityClient({ baseUrl: euid.url, apiKey: euid.apiKey, clientSecret: euid.clientSecret });
  uid2Client = new IdentityClient({ baseUrl: uid2.url, apiKey: uid2.apiKey, clientSecret: uid2.clientSecret });
});

afterAll(async () => {
  await client?.close();
  await uid2Client?.close();
  await Promise.all([euid?.stop(), uid2?.stop()]);
});

describe('generateToken with tcfConsentString', () => {
  it('types the answer as success, optout or insufficient_user_consent', () => {
    expectTypeOf<GenerateTokenResult>().toEqualTypeOf<
      { status: 'success'; identity: TokenIdentity } | { status: 'optout' } | { status: 'insufficient_user_consent' }
    >();
    expectTypeOf<GenerateTokenOptions['tcfConsentString']>().toEqualTypeOf<string | undefined>();
    expectTypeOf(client.generateToken).parameter(1).toEqualTypeOf<GenerateTokenOptions | undefined>();
  });

  it('answers insufficient_user_consent, a result and not an error, when consent is lacking', async () => {
    const answer = await client.generateToken(
      { email: 'user@example.com' },
      { tcfConsentString: PYTHON_CLIENT_TC_STRING },
    );
    expect(answer).toEqual({ status: 'insufficient_user_consent' });
  });

  it('issues an identity when vendor 21 has every purpose EUID needs', async () => {
    const answer = await client.generateToken(
      { email: 'user@example.com' },
      { tcfConsentString: tcString(FULL_GRANTS) },
    );
    expect(answer.status).toBe('success');
  });

  it('throws the ClientError the service answers for a string it cannot read', async () => {
    const err = await client
      .generateToken({ email: 'user@example.com' }, { tcfConsentString: 'not-a-consent-string' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ClientError);
    expect((err as ClientError).message).toContain('User consent is invalid');
    expect((err as ClientError).httpStatus).toBe(400);
  });

  it('refuses an empty or non-string tcfConsentString before sending', async () => {
    const before = Object.values(euid.stats().requests).reduce((a, b) => a + b, 0);
    await expect(client.generateToken({ email: 'user@example.com' }, { tcfConsentString: ' ' })).rejects.toThrow(
      ArgumentError,
    );
    await expect(
      client.generateToken({ email: 'user@example.com' }, { tcfConsentString: 7 as unknown as string }),
    ).rejects.toThrow(/tcfConsentString must be a string/);
    expect(Object.values(euid.stats().requests).reduce((a, b) => a + b, 0)).toBe(before);
  });

  it('is ignored by a UID2 service', async () => {
    const answer = await uid2Client.generateToken(
      { email: 'user@example.com' },
      { tcfConsentString: PYTHON_CLIENT_TC_STRING },
    );
    expect(answer.status).toBe('success');
  });
});
