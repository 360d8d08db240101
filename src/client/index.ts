/**
 * The identity-service client: one undici Pool, bearer auth, a fresh encrypted envelope per attempt, and one retry
 * policy (429 / 5xx / network errors, exponential backoff with full jitter) under every endpoint method.
 *
 * ```ts
 * const client = createServiceClient({ baseUrl: 'https://operator-integ.uidapi.com', apiKey, clientSecret });
 * try {
 *   const body = await client.mapV3({ email_hash: [hash] }, { signal });   // body.email_hash[0]: {u, p, r} or {e}
 *   const identity = await client.tokenGenerate({ email: 'user@example.com' });
 *   if (identity.status === 'success') {
 *     const next = await client.tokenRefresh(identity.identity.refresh_token, identity.identity.refresh_response_key);
 *   }
 * } finally {
 *   await client.close();
 * }
 * ```
 *
 * Failures: a non-200 answer throws the typed error of src/protocol/errors.ts (ClientError, ClockSkewError,
 * UnauthorizedError, RateLimitedError, ServerError, InvalidTokenError, ExpiredTokenError...); a connection failure
 * or timeout throws NetworkError; CallOptions.signal throws AbortError; a 200 that is not what the endpoint promises
 * throws UnexpectedResponseError (MalformedAnswerError, retried first, when it or one of its items breaks the wire
 * contract; or an EnvelopeError when it does not decrypt or echoes the wrong nonce); a refresh
 * answer that does not open with the given key throws RefreshKeyMismatchError. `client.stats` counts every attempt.
 */
export { createServiceClient, CLIENT_DEFAULTS } from './service-client.js';
export {
  AbortError,
  MalformedAnswerError,
  NetworkError,
  RefreshKeyMismatchError,
  UnexpectedResponseError,
  type NetworkFailure,
} from './errors.js';
export { backoffDelayMs, parseRetryAfter, isRetryable, RETRY_AFTER_CAP_MS } from './retry.js';
export { CLIENT_VERSION } from './client-version.js';
export { ATTEMPT_TIMEOUT_CODE } from './transport.js';
export {
  describeProxyRoute,
  noProxyMatch,
  NO_PROXY_SETTINGS,
  proxyRouteFor,
  redactProxyUrl,
  type ProxyAddress,
  type ProxyRoute,
  type ProxySettings,
} from './proxy.js';
export type { CallOptions, ClientOptions, ClientStats, RetryEvent, ServiceClient } from './types.js';
