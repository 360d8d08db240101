/**
 * The library's errors: one class per way a call can fail, each with a stable `code` a program can switch on. They
 * carry the names the library's users program against; the client's and protocol's classes they wrap (as `cause`)
 * stay internal, free to change with the wire.
 */
import {
  AbortError as ClientAbortError,
  MalformedAnswerError,
  NetworkError as ClientNetworkError,
  RefreshKeyMismatchError,
  UnexpectedResponseError as ClientUnexpectedResponseError,
  type NetworkFailure,
} from '../client/index.js';
import { ConfigError } from '../config/index.js';
import { PhoneRegionError } from '../identity/index.js';
import { ServiceUnreachableError } from '../pipeline/run/unreachable-service.js';
import {
  ClientError as ServiceClientError,
  ClockSkewError as ServiceClockSkewError,
  EnvelopeError,
  ExpiredTokenError as ServiceExpiredTokenError,
  InvalidTokenError as ServiceInvalidTokenError,
  RateLimitedError as ServiceRateLimitedError,
  ServerError as ServiceServerError,
  ServiceError,
  UnauthorizedError as ServiceUnauthorizedError,
} from '../protocol/index.js';

/**
 * What went wrong, in a word that stays the same from release to release (messages may be reworded):
 * - `invalid_argument`: the call's arguments or options are wrong; nothing was sent;
 * - `unauthorized`: the service refused the API key (401);
 * - `client_error`: the service refused the request (400), e.g. a client secret that is not the key's;
 * - `clock_skew`: the service refused this machine's clock (400 "Invalid timestamp");
 * - `invalid_token`, `expired_token`: the service refused the token given;
 * - `rate_limited`: still 429 after the last attempt;
 * - `server_error`: still 5xx after the last attempt;
 * - `service_error`: another answer the service refused the call with;
 * - `network`: no answer (connection refused or reset, host not found, TLS, proxy) after the last attempt;
 * - `timeout`: an attempt got no whole answer in time, and neither did the last one;
 * - `decrypt`: an answer that does not decrypt with the keys given;
 * - `unexpected_response`: an answer that breaks the service's contract;
 * - `aborted`: the call's `signal` fired.
 */
export type ErrorCode =
  | 'invalid_argument'
  | 'unauthorized'
  | 'client_error'
  | 'clock_skew'
  | 'invalid_token'
  | 'expired_token'
  | 'rate_limited'
  | 'server_error'
  | 'service_error'
  | 'network'
  | 'timeout'
  | 'decrypt'
  | 'unexpected_response'
  | 'aborted';

/**
 * The base class of every error the library throws on purpose. Its message never holds an API key, a client
 * secret, a refresh_response_key, an email or a phone number.
 */
export class Uid2Error extends Error {
  override name = 'Uid2Error';
  constructor(
    /** Stable across releases: switch on this, not on the message. */
    readonly code: ErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
  /** Whether the same call may succeed later as it is (the library already retried it). */
  get retryable(): boolean {
    return false;
  }
}

/** An argument or option is wrong: the message says which and how to fix it. Thrown before anything is sent. */
export class ArgumentError extends Uid2Error {
  override name = 'ArgumentError';
  constructor(message: string, options?: { cause?: unknown }) {
    super('invalid_argument', message, options);
  }
}

/** An answer of the service that refused the call, with its HTTP status and the service's own status word. */
export class ServiceRefusedError extends Uid2Error {
  override name = 'ServiceRefusedError';
  constructor(
    code: ErrorCode,
    message: string,
    /** The HTTP status of the answer. */
    readonly httpStatus: number,
    /** The answer's `status` word, e.g. `unauthorized` or `client_error`. */
    readonly serviceStatus: string,
    options?: { cause?: unknown },
  ) {
    super(code, message, options);
  }
}

/** 401: no key, an unknown or disabled key, or a key without the role the endpoint needs. */
export class UnauthorizedError extends ServiceRefusedError {
  override name = 'UnauthorizedError';
}

/** 400: the request was refused as it is; sending it again cannot help. */
export class ClientError extends ServiceRefusedError {
  override name = 'ClientError';
}

/** 400 "Invalid timestamp": this machine's clock is off by more than the service allows; set it right (NTP). */
export class ClockSkewError extends ClientError {
  override name = 'ClockSkewError';
}

/** The token given is not one the service accepts (damaged, of another environment or scope). */
export class InvalidTokenError extends ServiceRefusedError {
  override name = 'InvalidTokenError';
}

/** The token given has expired. */
export class ExpiredTokenError extends ServiceRefusedError {
  override name = 'ExpiredTokenError';
}

/** 429 after the last attempt: the service (or its gateway) asks for fewer requests. */
export class RateLimitedError extends ServiceRefusedError {
  override name = 'RateLimitedError';
  override get retryable(): boolean {
    return true;
  }
}

/** 5xx after the last attempt. */
export class ServerError extends ServiceRefusedError {
  override name = 'ServerError';
  override get retryable(): boolean {
    return true;
  }
}

/** No answer after the last attempt: connection refused or reset, host not found, TLS handshake, proxy refusal. */
export class NetworkError extends Uid2Error {
  override name = 'NetworkError';
  constructor(
    message: string,
    /** What failed on the way (`refused`, `dns`, `tls`, `proxy-auth`...). */
    readonly failure: NetworkFailure,
    options?: { cause?: unknown; code?: 'network' | 'timeout' },
  ) {
    super(options?.code ?? 'network', message, options);
  }
  override get retryable(): boolean {
    return this.failure !== 'proxy-auth' && this.failure !== 'tls';
  }
}

/** An attempt got no whole answer within `timeoutMs`, nor did the last one. */
export class TimeoutError extends NetworkError {
  override name = 'TimeoutError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, 'timeout', { ...options, code: 'timeout' });
  }
}

/** An answer that does not decrypt with the keys given (a refresh_response_key of another answer, say). */
export class DecryptError extends Uid2Error {
  override name = 'DecryptError';
  constructor(message: string, options?: { cause?: unknown }) {
    super('decrypt', message, options);
  }
}

/** An answer that breaks the service's contract (not JSON, wrong shape, unknown status), after the retries. */
export class UnexpectedResponseError extends Uid2Error {
  override name = 'UnexpectedResponseError';
  constructor(message: string, options?: { cause?: unknown }) {
    super('unexpected_response', message, options);
  }
}

/** The call's `signal` fired: nothing more is sent for it. */
export class AbortError extends Uid2Error {
  override name = 'AbortError';
  constructor(message: string, options?: { cause?: unknown }) {
    super('aborted', message, options);
  }
}

/**
 * The library's error for a failure of the layers below it (client, protocol, config, pipeline); the original
 * stays as `cause`. Errors of the library itself, and anything not known here (a bug), pass through unchanged.
 */
export function libraryError(err: unknown): unknown {
  if (err instanceof Uid2Error) return err;
  if (err instanceof ServiceUnreachableError && err.cause !== undefined) return libraryError(err.cause);
  const cause = { cause: err };
  if (err instanceof ConfigError || err instanceof PhoneRegionError) return new ArgumentError(err.message, cause);
  if (err instanceof ClientAbortError) return new AbortError(err.message, cause);
  if (err instanceof ClientNetworkError) {
    return err.failure === 'timeout'
      ? new TimeoutError(err.message, cause)
      : new NetworkError(err.message, err.failure, cause);
  }
  if (err instanceof RefreshKeyMismatchError || err instanceof EnvelopeError)
    return new DecryptError(err.message, cause);
  if (err instanceof MalformedAnswerError || err instanceof ClientUnexpectedResponseError)
    return new UnexpectedResponseError(err.message, cause);
  if (err instanceof ServiceError) {
    const args = [err.message, err.httpStatus, String(err.status), cause] as const;
    if (err instanceof ServiceUnauthorizedError) return new UnauthorizedError('unauthorized', ...args);
    if (err instanceof ServiceClockSkewError) return new ClockSkewError('clock_skew', ...args);
    if (err instanceof ServiceClientError) return new ClientError('client_error', ...args);
    if (err instanceof ServiceInvalidTokenError) return new InvalidTokenError('invalid_token', ...args);
    if (err instanceof ServiceExpiredTokenError) return new ExpiredTokenError('expired_token', ...args);
    if (err instanceof ServiceRateLimitedError) return new RateLimitedError('rate_limited', ...args);
    if (err instanceof ServiceServerError) return new ServerError('server_error', ...args);
    return new ServiceRefusedError('service_error', ...args);
  }
  return err;
}
