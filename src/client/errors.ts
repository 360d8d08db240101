import { EnvelopeError } from '../protocol/index.js';

/**
 * Errors the client raises itself. Service answers (400/401/429/5xx) are the typed errors of src/protocol/errors.ts;
 * these cover what happens before an answer arrives, or an answer the client cannot accept.
 * Messages name the service by its base URL only: never a key, a secret or an identifier.
 */

export type NetworkFailure = 'refused' | 'reset' | 'timeout' | 'dns' | 'unreachable' | 'closed';

/** The connection failed, dropped or timed out: worth another attempt with a fresh envelope. */
export class NetworkError extends Error {
  override name = 'NetworkError';
  readonly retryable = true;
  constructor(
    /** Base URL (no credentials) and path of the call. */
    readonly target: string,
    readonly failure: NetworkFailure,
    /** The low-level code, e.g. ECONNREFUSED or UND_ERR_HEADERS_TIMEOUT. */
    readonly code: string,
    options?: { cause?: unknown },
  ) {
    super(`${describeFailure(failure)} talking to the identity service at ${target} (${code})`, options);
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
  readonly retryable = false;
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
