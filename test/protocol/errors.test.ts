import { describe, expect, it } from 'vitest';
import {
  ClientError,
  ClockSkewError,
  ExpiredTokenError,
  InvalidTokenError,
  PayloadTooLargeError,
  RateLimitedError,
  ServerError,
  UnauthorizedError,
  errorFromResponse,
} from '../../src/protocol/index.js';

describe('errorFromResponse', () => {
  it.each([
    [401, '{"status":"unauthorized"}', UnauthorizedError, false],
    [400, '{"status":"client_error","message":"Invalid body: Body is missing."}', ClientError, false],
    [
      400,
      '{"status":"client_error","message":"Invalid timestamp: Request too old or client time drift."}',
      ClockSkewError,
      false,
    ],
    [400, '{"status":"invalid_token","message":"Invalid Token presented"}', InvalidTokenError, false],
    [400, '{"status":"expired_token","message":"Expired Token presented"}', ExpiredTokenError, false],
    [429, '', RateLimitedError, true],
    [413, 'Request Entity Too Large', PayloadTooLargeError, false],
    [500, 'Internal Server Error', ServerError, true],
    [503, '{"status":"unknown","message":"x"}', ServerError, true],
  ] as const)('%i %s', (http, body, type, retryable) => {
    const e = errorFromResponse(http, body);
    expect(e).toBeInstanceOf(type);
    expect(e.retryable).toBe(retryable);
    expect(e.httpStatus).toBe(http);
  });

  it('names clock skew plainly', () => {
    expect(
      errorFromResponse(
        400,
        '{"status":"client_error","message":"Invalid timestamp: Request too old or client time drift."}',
      ).message,
    ).toMatch(/^clock skew/);
  });

  it('keeps the service message of a client error', () => {
    const e = errorFromResponse(400, '{"status":"client_error","message":"Incorrect request format"}');
    expect(e.serviceMessage).toBe('Incorrect request format');
    expect(e.message).toContain('Incorrect request format');
  });
});
