import {
  prepareIdentifier,
  sha256Base64,
  type DiiType,
  type IdentifierKind,
  type InvalidReason,
  type PrepareOptions,
} from '../../identity/index.js';
import {
  ClientError,
  ClockSkewError,
  ExpiredTokenError,
  InvalidTokenError,
  ServiceError,
  UnauthorizedError,
  decodeKey,
  IDENTITY_STRING_FIELDS,
  IDENTITY_TIME_FIELDS,
  pickTokenIdentity,
  type DiiInput,
  type TokenIdentity,
} from '../../protocol/index.js';
import { NetworkError, RefreshKeyMismatchError, type ServiceClient } from '../../client/index.js';

export type { TokenIdentity } from '../../protocol/index.js';
export type { IdentifierKind } from '../../identity/index.js';

/**
 * The token work of one identity (docs/wire-protocol.md §4, §5.1-5.2, §7): what is sent, how answers and
 * failures read, and the §6 test identities. The CLI turns these results into text and exit codes.
 */

/**
 * Current refresh tokens are 388 base64 characters (docs/wire-protocol.md §4.2); other lengths are legacy or
 * damaged.
 */
export const REFRESH_TOKEN_LENGTH = 388;

export type PreparedTokenInput =
  | { ok: true; type: DiiType; hash: string; input: DiiInput }
  | { ok: false; reason: InvalidReason };

/**
 * Normalizes and hashes locally, so only the hash is sent (as `email_hash` / `phone_hash`): a raw email or phone
 * never leaves the machine, and the hash is the exact one the service would compute from the raw value.
 */
export function prepareTokenInput(kind: IdentifierKind, value: string, options?: PrepareOptions): PreparedTokenInput {
  const prepared = prepareIdentifier(kind, value, options);
  if (!prepared.ok) return prepared;
  const input: DiiInput = prepared.type === 'email' ? { email_hash: prepared.hash } : { phone_hash: prepared.hash };
  return { ok: true, type: prepared.type, hash: prepared.hash, input };
}

// ---------------------------------------------------------------------------------------------------------------
// The §6 test identities

export type TestIdentityOutcome = 'optout' | 'refresh-optout' | 'validate';

export interface TestIdentity {
  /** The raw email or phone (public test values, not personal data). */
  value: string;
  type: DiiType;
  /** Base64 SHA-256 of the value: sending the hash is equivalent to sending the value. */
  hash: string;
  outcome: TestIdentityOutcome;
  /** What the service does with it, in a sentence. */
  expected: string;
}

const EXPECTED: Record<TestIdentityOutcome, string> = {
  optout: 'always opted out: token generate answers optout, map answers optout',
  'refresh-optout': 'generate and map succeed; any refresh of its token answers optout',
  validate: 'never opted out; token validate with the same identifier answers true',
};

/**
 * Operator mapping (docs/wire-protocol.md §7): the public generate page swaps the two phones; the operator does
 * not.
 */
export const TEST_IDENTITIES: readonly TestIdentity[] = (
  [
    ['optout@example.com', 'email', 'optout'],
    ['+00000000000', 'phone', 'optout'],
    ['refresh-optout@example.com', 'email', 'refresh-optout'],
    ['+00000000002', 'phone', 'refresh-optout'],
    ['validate@example.com', 'email', 'validate'],
    ['+12345678901', 'phone', 'validate'],
  ] as const
).map(([value, type, outcome]) => ({ value, type, hash: sha256Base64(value), outcome, expected: EXPECTED[outcome] }));

export const TEST_IDENTITIES_DOCS_NOTE =
  "The docs' token-generate page lists +00000000002 as always-optout and +00000000000 as refresh-optout; the operator, " +
  'the token-refresh page and the FAQ say the opposite, as listed here.';

export function testIdentity(type: DiiType, outcome: TestIdentityOutcome): TestIdentity {
  const found = TEST_IDENTITIES.find((t) => t.type === type && t.outcome === outcome);
  if (!found) throw new Error(`no ${type} test identity for ${outcome}`);
  return found;
}

// ---------------------------------------------------------------------------------------------------------------
// Identities held by the caller

/** What a refresh needs. The times are known only when a whole identity was given. */
export interface RefreshInput {
  refreshToken: string;
  refreshResponseKey: string;
  /** Unix ms. */
  refreshFrom?: number;
  /** Unix ms. */
  refreshExpires?: number;
}

export type ParsedIdentity = { ok: true; identity: TokenIdentity } | { ok: false; problem: string };

/**
 * Reads an identity as `token generate` prints it, or a whole service answer `{"status":"success","body":{...}}`.
 * Problems name fields, never values (the refresh_response_key is a secret).
 */
export function parseIdentity(text: string): ParsedIdentity {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { ok: false, problem: 'is not JSON (expected the identity object that token generate prints)' };
  }
  if (!isRecord(value))
    return { ok: false, problem: 'is not a JSON object (expected the identity object that token generate prints)' };
  if (value.status === 'optout') return { ok: false, problem: 'is an optout answer: there is no identity to refresh' };
  const body = isRecord(value.body) ? value.body : value;
  const missing: string[] = [];
  for (const f of IDENTITY_STRING_FIELDS) if (typeof body[f] !== 'string' || body[f] === '') missing.push(f);
  for (const f of IDENTITY_TIME_FIELDS) if (typeof body[f] !== 'number' || !Number.isFinite(body[f])) missing.push(f);
  if (missing.length > 0) {
    return {
      ok: false,
      problem: `lacks ${missing.join(', ')} (or has the wrong type): expected the identity object that token generate prints`,
    };
  }
  return { ok: true, identity: pickTokenIdentity(body) };
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function refreshInputOf(identity: TokenIdentity): RefreshInput {
  return {
    refreshToken: identity.refresh_token,
    refreshResponseKey: identity.refresh_response_key,
    refreshFrom: identity.refresh_from,
    refreshExpires: identity.refresh_expires,
  };
}

/** The key is checked before anything is sent, so a pasted-wrong key is a usage error, not a service failure. */
export function checkRefreshResponseKey(key: string): string | null {
  try {
    decodeKey(key, 'refresh_response_key');
    return null;
  } catch (err) {
    return err instanceof Error ? err.message : 'The refresh_response_key is not valid.';
  }
}

export type RefreshTiming =
  | { kind: 'unknown' }
  /** Before refresh_from: allowed, but the SDK would wait; refreshing early only burns requests. */
  | { kind: 'early'; inMs: number }
  | { kind: 'due' }
  /** At or after refresh_expires: the service will answer expired_token. */
  | { kind: 'expired'; agoMs: number };

export function refreshTiming(input: RefreshInput, nowMs: number): RefreshTiming {
  if (input.refreshExpires !== undefined && nowMs >= input.refreshExpires)
    return { kind: 'expired', agoMs: nowMs - input.refreshExpires };
  if (input.refreshFrom !== undefined && nowMs < input.refreshFrom)
    return { kind: 'early', inMs: input.refreshFrom - nowMs };
  if (input.refreshFrom === undefined && input.refreshExpires === undefined) return { kind: 'unknown' };
  return { kind: 'due' };
}

// ---------------------------------------------------------------------------------------------------------------
// Refresh

export type RefreshOutcome =
  | { kind: 'success'; identity: TokenIdentity }
  | { kind: 'optout' }
  /** Authenticated caller: the inner token is invalid (wrong scope or environment, damaged). */
  | { kind: 'invalid_token'; message: string }
  /** Authenticated caller: refresh_expires has passed. */
  | { kind: 'expired_token'; message: string }
  /** Unauthenticated caller: invalid or expired, the service does not say which. */
  | { kind: 'error'; message: string }
  /** The outer 388-char wrapper could not be read (client_error): truncated, altered or from another service. */
  | { kind: 'unreadable'; message: string }
  /** The answer did not decrypt with the key given: token and key come from different answers. */
  | { kind: 'key_mismatch'; message: string }
  | { kind: 'unauthorized'; message: string };

/**
 * One refresh, with the service's refusals turned into outcomes. Network failures, 5xx after the client's retries
 * and anything unexpected are thrown: they say nothing about the token.
 */
export async function refreshIdentity(
  client: ServiceClient,
  input: RefreshInput,
  signal?: AbortSignal,
): Promise<RefreshOutcome> {
  try {
    const result = await client.tokenRefresh(input.refreshToken, input.refreshResponseKey, { signal });
    return result.status === 'success' ? { kind: 'success', identity: result.identity } : { kind: 'optout' };
  } catch (err) {
    if (err instanceof RefreshKeyMismatchError) return { kind: 'key_mismatch', message: err.message };
    if (err instanceof InvalidTokenError) return { kind: 'invalid_token', message: serviceText(err) };
    if (err instanceof ExpiredTokenError) return { kind: 'expired_token', message: serviceText(err) };
    if (err instanceof UnauthorizedError) return { kind: 'unauthorized', message: serviceText(err) };
    if (err instanceof ServiceError && err.httpStatus === 400 && err.status === 'error')
      return { kind: 'error', message: serviceText(err) };
    if (err instanceof ClientError) return { kind: 'unreadable', message: serviceText(err) };
    throw err;
  }
}

function serviceText(err: ServiceError): string {
  return err.serviceMessage ?? err.status;
}

// ---------------------------------------------------------------------------------------------------------------
// Failures of encrypted calls, in words a user can act on

export type FailureKind =
  /** 401: no key, a wrong or disabled key, or a key without the endpoint's role. */
  | 'unauthorized'
  /** 400 "Check encryption key (ClientSecret)": the secret is not the one paired with the key. */
  | 'wrong_secret'
  /** 400 "Invalid timestamp": the envelope time is outside the service's window. */
  | 'clock_skew'
  | 'client_error'
  /** Connection refused, reset, timed out, DNS... */
  | 'network'
  /** 429 / 5xx after the client's retries. */
  | 'server'
  | 'other';

export interface Failure {
  kind: FailureKind;
  /** The service's own message, or the error's; never contains secrets or identifiers. */
  message: string;
  httpStatus?: number;
}

/** The service's 400 for a TCF consent string it cannot read (docs/wire-protocol.md §5.1). */
export function isUnreadableConsent(failure: Failure): boolean {
  return failure.kind === 'client_error' && /User consent is invalid/.test(failure.message);
}

export function classifyFailure(err: unknown): Failure {
  if (err instanceof UnauthorizedError)
    return { kind: 'unauthorized', message: serviceText(err), httpStatus: err.httpStatus };
  if (err instanceof ClockSkewError)
    return { kind: 'clock_skew', message: serviceText(err), httpStatus: err.httpStatus };
  if (err instanceof ClientError) {
    const text = serviceText(err);
    if (/Check encryption key \(ClientSecret\)/i.test(text))
      return { kind: 'wrong_secret', message: text, httpStatus: err.httpStatus };
    return { kind: 'client_error', message: text, httpStatus: err.httpStatus };
  }
  if (err instanceof ServiceError) {
    const kind: FailureKind = err.retryable ? 'server' : 'other';
    return { kind, message: err.message, httpStatus: err.httpStatus };
  }
  if (err instanceof NetworkError) return { kind: 'network', message: err.message };
  return { kind: 'other', message: err instanceof Error ? err.message : String(err) };
}
