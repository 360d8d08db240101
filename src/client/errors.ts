import { EnvelopeError } from '../protocol/index.js';

/**
 * Errors the client raises itself. Service answers (400/401/429/5xx) are the typed errors of src/protocol/errors.ts;
 * these cover what happens before an answer arrives, or an answer the client cannot accept.
 * Messages name the service by its base URL only: never a key, a secret or an identifier.
 */

/**
 * `proxy`: the proxy would not open the way to the service; `proxy-auth`: it wants other credentials (407); `tls`: the
 * TLS handshake failed (a certificate not trusted, or no TLS on that port).
 */
export type NetworkFailure =
  | 'refused'
  | 'reset'
  | 'timeout'
  | 'dns'
  | 'unreachable'
  | 'closed'
  | 'proxy'
  | 'proxy-auth'
  | 'tls';

/**
 * The connection failed, dropped or timed out: worth another attempt with a fresh envelope. The exceptions are a
 * proxy asking for credentials, which no retry can give, and a TLS handshake refused, which fails the same way again.
 */
export class NetworkError extends Error {
  override name = 'NetworkError';
  readonly retryable: boolean;
  /** The proxy the request went through (redacted: no user or password), if any. */
  readonly via: string | undefined;
  constructor(
    /** Base URL (no credentials) and path of the call. */
    readonly target: string,
    readonly failure: NetworkFailure,
    /** The low-level code, e.g. ECONNREFUSED or UND_ERR_HEADERS_TIMEOUT, or the proxy's HTTP status. */
    readonly code: string,
    options?: { cause?: unknown; via?: string; viaFrom?: string },
  ) {
    const through =
      options?.via === undefined
        ? ''
        : ` through the proxy ${options.via}${options.viaFrom ? ` (from ${options.viaFrom})` : ''}`;
    const fix =
      failure === 'proxy-auth'
        ? `; put the right user:password in the proxy URL${options?.viaFrom ? ` of ${options.viaFrom}` : ''}`
        : '';
    super(
      `${describeFailure(failure)} talking to the identity service at ${target}${through} (${code})${fix}`,
      options,
    );
    this.retryable = failure !== 'proxy-auth' && failure !== 'tls';
    this.via = options?.via;
  }
}

function describeFailure(failure: NetworkFailure): string {
  switch (failure) {
    case 'refused':
      return 'connection refused';
    case 'reset':
      return 'connection reset';
    case 'timeout':
      return 'timed out';
    case 'dns':
      return 'host name not found';
    case 'unreachable':
      return 'network unreachable';
    case 'closed':
      return 'connection closed by the other side';
    case 'proxy':
      return 'the proxy refused to forward the request';
    case 'proxy-auth':
      return 'the proxy refused the credentials (proxy authentication required)';
    case 'tls':
      return 'TLS handshake failed';
  }
}

/** CallOptions.signal fired: the call stops at once, also while waiting between attempts. */
export class AbortError extends Error {
  override name = 'AbortError';
  readonly retryable = false;
  constructor(target: string, options?: { cause?: unknown }) {
    super(`the call to ${target} was aborted`, options);
  }
}

/** A 200 answer that decrypted but is not what the endpoint promises (bad JSON, wrong shape, unknown status). */
export class UnexpectedResponseError extends Error {
  override name = 'UnexpectedResponseError';
  readonly retryable: boolean = false;
  constructor(
    readonly target: string,
    detail: string,
    /** The answer's `status` when there was one, e.g. insufficient_user_consent. */
    readonly status?: string,
  ) {
    super(`unexpected answer from ${target}: ${detail}`);
  }
}

/**
 * A 200 answer that breaks the wire contract (docs/wire-protocol.md §5.8): not JSON, a body of the wrong shape, or
 * one item that is not what the endpoint answers (an empty or numeric raw UID, an `r` that is no time, an unknown
 * `e`...). Nothing of such an answer can be trusted, so none of it is used. It is retried like a 5xx: a fault on the
 * way or in one server is the likely cause. The detail names the item and the rule, never a value.
 */
export class MalformedAnswerError extends UnexpectedResponseError {
  override name = 'MalformedAnswerError';
  override readonly retryable: boolean = true;
  constructor(target: string, detail: string) {
    super(target, detail);
    this.message = `malformed answer from ${target}: ${detail}`;
  }
}

/**
 * A refresh answer that does not decrypt with the refresh_response_key given: the service encrypts it with the key
 * issued together with the presented refresh_token, so the two come from different generate/refresh answers.
 */
export class RefreshKeyMismatchError extends EnvelopeError {
  override name = 'RefreshKeyMismatchError';
  readonly retryable = false;
  constructor() {
    super(
      'decrypt-failed',
      'the token refresh answer does not decrypt with the refresh_response_key given: that key does not belong to ' +
        'this refresh_token (use the refresh_response_key from the same generate or refresh answer as the token; ' +
        'an older key does not work)',
    );
  }
}
