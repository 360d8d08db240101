/**
 * Non-200 answers of the service as typed errors (docs/wire-protocol.md §2.4, §3.3, §4.4).
 * Messages come from the service and never contain the caller's secrets or DII.
 */

export type ServiceStatus =
  | 'client_error'
  | 'unauthorized'
  | 'invalid_token'
  | 'expired_token'
  | 'error'
  | 'unknown'
  | 'rate_limited'
  | 'payload_too_large'
  | 'server_error';

export class ServiceError extends Error {
  constructor(
    readonly httpStatus: number,
    readonly status: ServiceStatus | string,
    readonly serviceMessage: string | undefined,
    message?: string,
  ) {
    super(
      message ??
        (serviceMessage ? `${status} (HTTP ${httpStatus}): ${serviceMessage}` : `${status} (HTTP ${httpStatus})`),
    );
    this.name = 'ServiceError';
  }
  /** 429, 5xx: worth another attempt with a fresh envelope. */
  get retryable(): boolean {
    return this.httpStatus === 429 || this.httpStatus >= 500;
  }
}

/** 400 client_error: the request was wrong; retrying the same request cannot help. */
export class ClientError extends ServiceError {
  override name = 'ClientError';
}

/** 400 "Invalid timestamp": the envelope's clock is outside the service's window. */
export class ClockSkewError extends ClientError {
  override name = 'ClockSkewError';
}

/** 401: no key, an unknown or disabled key, or a key without the role the endpoint needs. */
export class UnauthorizedError extends ServiceError {
  override name = 'UnauthorizedError';
}

export class InvalidTokenError extends ServiceError {
  override name = 'InvalidTokenError';
}

export class ExpiredTokenError extends ServiceError {
  override name = 'ExpiredTokenError';
}

/** 429 with no body, sent by the gateway in front of the operator. */
export class RateLimitedError extends ServiceError {
  override name = 'RateLimitedError';
}

/** 413: the body was over 1 MB. */
export class PayloadTooLargeError extends ServiceError {
  override name = 'PayloadTooLargeError';
}

/** 5xx. */
export class ServerError extends ServiceError {
  override name = 'ServerError';
}

function parseErrorBody(text: string): { status?: string; message?: string } {
  try {
    const v: unknown = JSON.parse(text);
    if (v && typeof v === 'object') {
      const o = v as Record<string, unknown>;
      return {
        status: typeof o.status === 'string' ? o.status : undefined,
        message: typeof o.message === 'string' ? o.message : undefined,
      };
    }
  } catch {
    // plain-text bodies (413, some 500s) carry no status
  }
  return {};
}

/** Maps a non-200 answer to its typed error. */
export function errorFromResponse(httpStatus: number, bodyText: string): ServiceError {
  const { status, message } = parseErrorBody(bodyText);
  if (httpStatus === 429) return new RateLimitedError(429, 'rate_limited', undefined, 'rate limited (HTTP 429)');
  if (httpStatus === 413)
    return new PayloadTooLargeError(413, 'payload_too_large', undefined, 'request body over the 1 MB limit (HTTP 413)');
  if (httpStatus === 401) return new UnauthorizedError(401, status ?? 'unauthorized', message);
  if (httpStatus >= 500)
    return new ServerError(httpStatus, status ?? 'server_error', message ?? (bodyText.slice(0, 200) || undefined));
  if (status === 'invalid_token') return new InvalidTokenError(httpStatus, status, message);
  if (status === 'expired_token') return new ExpiredTokenError(httpStatus, status, message);
  if (status === 'client_error' && message?.startsWith('Invalid timestamp')) {
    return new ClockSkewError(
      httpStatus,
      status,
      message,
      `clock skew: the service rejected the request time (${message}); set this machine's clock right (NTP) and try again`,
    );
  }
  if (httpStatus === 400) return new ClientError(httpStatus, status ?? 'client_error', message);
  return new ServiceError(httpStatus, status ?? 'error', message ?? (bodyText.slice(0, 200) || undefined));
}
