/** What doctor asks the service itself: the key's roles, the client secret, the clock and token refresh, each with its fix. */
import type { ServiceClient } from '../run/connection.js';
import {
  classifyFailure,
  refreshIdentity,
  refreshInputOf,
  testIdentity,
  type Failure,
  type TokenIdentity,
} from '../tokens/tokens.js';

/** The roles doctor can check. */
export type Role = 'mapper' | 'generator' | 'optout';

export type CheckStatus = 'pass' | 'warn' | 'fail' | 'skip';

export interface Check {
  name: string;
  status: CheckStatus;
  detail: string;
  fix?: string;
}

/** Envelope times further apart than this fail the check: the docs' budget (the operator's cut is ~2 min). */
export const SKEW_FAIL_MS = 60_000;
/** Half the budget: still accepted, but a slow request or retry could push it out. */
export const SKEW_WARN_MS = 30_000;

const ROLE_NAME: Record<Role, string> = {
  mapper: 'MAPPER',
  generator: 'GENERATOR',
  optout: 'MAPPER, SHARER or ID_READER',
};
export const ROLE_CHECK: Record<Role, string> = {
  mapper: 'mapper role',
  generator: 'generator role',
  optout: 'opt-out status',
};
const ROLE_USE: Record<Role, string> = {
  mapper: 'needed by map and remap-due',
  generator: 'needed by token generate and validate',
  optout: 'needed by optout-check',
};

const SECRET_FIX =
  'use the client secret issued together with this API key (UID2_CLIENT_SECRET or --client-secret-file); integ and prod have different pairs';
const NTP_FIX =
  "set this machine's clock right: turn on NTP time sync (e.g. `timedatectl set-ntp true`, `sntp -sS time.apple.com`, or `w32tm /resync` on Windows)";

type CallResult<T> = { ok: true; value: T } | { ok: false; failure: Failure };

async function attempt<T>(call: () => Promise<T>): Promise<CallResult<T>> {
  try {
    return { ok: true, value: await call() };
  } catch (err) {
    return { ok: false, failure: classifyFailure(err) };
  }
}

export async function checkService(
  client: ServiceClient,
  options: { roles: readonly Role[] },
  add: (c: Check) => void,
): Promise<{ authRefused: boolean }> {
  const emailHash = testIdentity('email', 'validate').hash;
  const results = new Map<Role, CallResult<string>>();
  let identity: TokenIdentity | undefined;
  let rawUid: string | undefined;

  for (const role of options.roles) {
    if (role === 'mapper') {
      const r = await attempt(() => client.mapV3({ email_hash: [emailHash] }));
      const item = r.ok ? r.value.email_hash[0] : undefined;
      if (r.ok && item && 'u' in item) rawUid = item.u;
      results.set(
        role,
        r.ok
          ? rawUid
            ? { ok: true, value: 'v3 map of validate@example.com returned a raw UID' }
            : { ok: true, value: 'v3 map answered, without a raw UID' }
          : r,
      );
    } else if (role === 'generator') {
      const r = await attempt(() => client.tokenGenerate({ email_hash: emailHash }));
      if (r.ok && r.value.status === 'success') identity = r.value.identity;
      if (!r.ok) results.set(role, r);
      else if (!identity)
        results.set(role, {
          ok: false,
          failure: {
            kind: 'other',
            message: 'token generate of validate@example.com answered optout, which it never should',
          },
        });
      else {
        const token = identity.advertising_token;
        const v = await attempt(() => client.tokenValidate({ token, email_hash: emailHash }));
        if (!v.ok) results.set(role, v);
        else if (!v.value)
          results.set(role, {
            ok: false,
            failure: {
              kind: 'other',
              message: 'token validate answered false for a token just generated from the same identifier',
            },
          });
        else results.set(role, { ok: true, value: 'token generate and validate of validate@example.com work' });
      }
    } else {
      // Any 44-char string is a valid request; an unknown raw UID just comes back not opted out.
      const ids = [rawUid ?? 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA='];
      const r = await attempt(() => client.optoutStatus(ids));
      results.set(
        role,
        r.ok ? { ok: true, value: `opt-out status of one raw UID answered (${r.value.length} opted out)` } : r,
      );
    }
  }

  const failures = [...results.values()]
    .filter((r): r is { ok: false; failure: Failure } => !r.ok)
    .map((r) => r.failure);
  const anySuccess = [...results.values()].some((r) => r.ok);
  const all401 =
    results.size > 0 && failures.length === results.size && failures.every((f) => f.kind === 'unauthorized');
  const secretWrong = failures.some((f) => f.kind === 'wrong_secret');
  const skewRefused = failures.find((f) => f.kind === 'clock_skew');
  const authRefused = failures.some((f) => f.kind === 'unauthorized');

  // API key
  if (all401) {
    add({
      name: 'API key',
      status: 'fail',
      detail:
        'the service refused the API key on every call (401): the key is wrong, disabled, or for another environment',
      fix: 'check UID2_API_KEY / --api-key-file: integ and prod keys differ, and EUID keys do not work on UID2 (or the reverse)',
    });
  } else {
    add({ name: 'API key', status: 'pass', detail: 'accepted by the service' });
  }

  // client secret
  if (secretWrong) {
    add({
      name: 'client secret',
      status: 'fail',
      detail:
        'the client secret does not match the API key: the service could not decrypt the request (400 Check encryption key (ClientSecret))',
      fix: SECRET_FIX,
    });
  } else if (anySuccess) {
    add({ name: 'client secret', status: 'pass', detail: 'requests and answers decrypt' });
  } else if (skewRefused) {
    // the service decrypts the envelope before it reads the time in it
    add({
      name: 'client secret',
      status: 'pass',
      detail: 'the service decrypted the requests (it then refused their time)',
    });
  } else {
    add({
      name: 'client secret',
      status: 'skip',
      detail: 'not checked: no call got past the checks before decryption',
    });
  }

  // clock skew
  const seen = client.lastServerTime;
  if (skewRefused) {
    add({
      name: 'clock skew',
      status: 'fail',
      detail: `the service rejected the request time (${skewRefused.message}): this machine's clock and the service's differ by more than about 2 minutes`,
      fix: NTP_FIX,
    });
  } else if (seen) {
    const skewMs = seen.localMs - seen.serverMs;
    const text = `this machine's clock is ${(Math.abs(skewMs) / 1000).toFixed(1)} s ${skewMs >= 0 ? 'ahead of' : 'behind'} the service's`;
    const abs = Math.abs(skewMs);
    if (abs > SKEW_FAIL_MS)
      add({
        name: 'clock skew',
        status: 'fail',
        detail: `${text}; the service accepts requests at most 60 s off (the docs' rule)`,
        fix: NTP_FIX,
      });
    else if (abs > SKEW_WARN_MS)
      add({
        name: 'clock skew',
        status: 'warn',
        detail: `${text}; close to the 60 s the service allows`,
        fix: NTP_FIX,
      });
    else add({ name: 'clock skew', status: 'pass', detail: text });
  } else {
    add({
      name: 'clock skew',
      status: 'skip',
      detail: 'not checked: no encrypted answer to read the service time from',
    });
  }

  // roles
  for (const role of options.roles) {
    const r = results.get(role)!;
    const name = ROLE_CHECK[role];
    if (r.ok) add({ name, status: 'pass', detail: r.value });
    else if (r.failure.kind === 'unauthorized') {
      add({
        name,
        status: 'fail',
        detail: `the key lacks the ${ROLE_NAME[role]} role or is wrong (401; ${ROLE_USE[role]})`,
        fix: all401
          ? 'fix the API key first (see above)'
          : `ask your UID2 contact to add the ${ROLE_NAME[role]} role to this key, or leave it out with --roles if you do not need it`,
      });
    } else if (r.failure.kind === 'wrong_secret')
      add({ name, status: 'skip', detail: 'not checked: the client secret does not match the API key' });
    else if (r.failure.kind === 'clock_skew') add({ name, status: 'skip', detail: 'not checked: the clock is off' });
    else
      add({
        name,
        status: 'fail',
        detail: r.failure.message,
        fix: r.failure.kind === 'network' ? 'check the connection to the service' : undefined,
      });
  }

  // refresh: no role needed, but it proves the refresh_response_key round trip
  if (!identity) {
    add({
      name: 'token refresh',
      status: 'skip',
      detail: options.roles.includes('generator')
        ? 'not checked: no identity was generated'
        : 'not checked: needs the generator check',
    });
    return { authRefused };
  }
  try {
    const outcome = await refreshIdentity(client, refreshInputOf(identity));
    if (outcome.kind === 'success')
      add({
        name: 'token refresh',
        status: 'pass',
        detail: 'the new identity decrypted with the refresh_response_key',
      });
    else
      add({
        name: 'token refresh',
        status: 'fail',
        detail: `refreshing a fresh identity answered ${outcome.kind}${'message' in outcome ? `: ${outcome.message}` : ''}`,
      });
  } catch (err) {
    add({ name: 'token refresh', status: 'fail', detail: classifyFailure(err).message });
  }
  return { authRefused };
}
