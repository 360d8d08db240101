import { setTimeout as delay } from 'node:timers/promises';
import { errorFromResponse, ServiceError } from '../protocol/index.js';
import { AbortError, MalformedAnswerError, NetworkError } from './errors.js';
import type { OutgoingRequest, RawResponse, Transport } from './transport.js';
import type { CallOptions, ClientStats, RetryEvent } from './types.js';

/**
 * The one retry policy of the client, wrapped around the transport the way undici's RetryHandler wraps a dispatch:
 * endpoint methods hand it a builder for one attempt and a reader of its 200 answer, and get back the first answer
 * that reads, or the last typed error.
 *
 * - retried: 429, 5xx, NetworkError (refused, reset, dropped, timed out), and a 200 whose reader finds it malformed
 *   (MalformedAnswerError): nothing of such an answer is handed on;
 * - never retried: every other answer (400, 401, 413...), which are the caller's to fix;
 * - wait before attempt n+1: full jitter, random(0, min(backoffMaxMs, backoffBaseMs * 2^(n-1))), raised to the
 *   server's Retry-After when it sends one.
 * The builder runs again for every attempt, because the service rejects an envelope whose timestamp has aged.
 */

export interface RetrySettings {
  maxAttempts: number;
  backoffBaseMs: number;
  backoffMaxMs: number;
  /** [0, 1) */
  random: () => number;
  sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  onRetry?: (event: RetryEvent) => void;
  now: () => number;
}

/** A gateway asking for more than this is treated as asking for this: a batch run should not stall for hours unseen. */
export const RETRY_AFTER_CAP_MS = 5 * 60_000;

export interface Attempt<C> {
  request: OutgoingRequest;
  /** What the caller needs to read this attempt's answer (e.g. the envelope nonce). */
  context: C;
}

/** Turns one attempt's 200 answer into what the endpoint returns; throws MalformedAnswerError to have it retried. */
export type ReadAnswer<C, T> = (response: RawResponse, context: C) => T;

export function defaultSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return delay(ms, undefined, { signal });
}

/** Full-jitter backoff for the wait after failed attempt `attempt` (1-based). */
export function backoffDelayMs(
  attempt: number,
  settings: Pick<RetrySettings, 'backoffBaseMs' | 'backoffMaxMs' | 'random'>,
  retryAfterMs?: number,
): number {
  const cap = Math.min(settings.backoffMaxMs, settings.backoffBaseMs * 2 ** (attempt - 1));
  const jittered = Math.floor(settings.random() * cap);
  return retryAfterMs === undefined ? jittered : Math.max(jittered, retryAfterMs);
}

/** Retry-After as delta-seconds or an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | string[] | undefined, nowMs: number): number | undefined {
  const text = (Array.isArray(value) ? value[0] : value)?.trim();
  if (!text) return undefined;
  let ms: number;
  if (/^\d+$/.test(text)) {
    ms = Number(text) * 1000;
  } else {
    const at = Date.parse(text);
    if (Number.isNaN(at)) return undefined;
    ms = Math.max(0, at - nowMs);
  }
  return Math.min(ms, RETRY_AFTER_CAP_MS);
}

export function isRetryable(error: unknown): boolean {
  if (error instanceof NetworkError || error instanceof MalformedAnswerError) return error.retryable;
  return error instanceof ServiceError && error.retryable;
}

interface Failure {
  error: Error;
  httpStatus?: number;
  retryAfterMs?: number;
}

function readOrFailure<C, T>(response: RawResponse, context: C, read: ReadAnswer<C, T>): { answer: T } | Failure {
  try {
    return { answer: read(response, context) };
  } catch (err) {
    if (err instanceof MalformedAnswerError) return { error: err };
    throw err;
  }
}

export class RetryPolicy {
  constructor(
    private readonly transport: Transport,
    private readonly settings: RetrySettings,
    private readonly stats: ClientStats,
  ) {}

  async dispatch<C, T>(
    path: string,
    build: () => Attempt<C>,
    read: ReadAnswer<C, T>,
    call: CallOptions = {},
  ): Promise<T> {
    const { signal } = call;
    const target = this.transport.target + path;
    const maxAttempts = Math.max(1, call.maxAttempts ?? this.settings.maxAttempts);
    for (let attempt = 1; ; attempt++) {
      if (signal?.aborted) throw new AbortError(target, { cause: signal.reason });
      const { request, context } = build();
      const outcome = await this.attemptOnce(path, target, request, signal);
      const failure = 'response' in outcome ? readOrFailure(outcome.response, context, read) : outcome;
      if ('answer' in failure) return failure.answer;
      if (attempt >= maxAttempts || !isRetryable(failure.error)) throw failure.error;
      const delayMs = backoffDelayMs(attempt, this.settings, failure.retryAfterMs);
      this.stats.retries++;
      this.settings.onRetry?.({ path, attempt, delayMs, httpStatus: failure.httpStatus, error: failure.error });
      await this.pause(delayMs, target, signal);
    }
  }

  private async attemptOnce(
    path: string,
    target: string,
    request: OutgoingRequest,
    signal: AbortSignal | undefined,
  ): Promise<{ response: RawResponse } | Failure> {
    this.stats.requests++;
    let response: RawResponse;
    try {
      response = await this.transport.post(path, request, signal);
    } catch (err) {
      if (signal?.aborted) throw new AbortError(target, { cause: err });
      if (!(err instanceof NetworkError)) throw err;
      this.stats.networkErrors++;
      return { error: err };
    }
    if (response.statusCode === 200) return { response };
    if (response.statusCode === 429) this.stats.http429++;
    else if (response.statusCode >= 500) this.stats.http5xx++;
    return {
      error: errorFromResponse(response.statusCode, response.body.toString('utf8')),
      httpStatus: response.statusCode,
      retryAfterMs: parseRetryAfter(response.headers['retry-after'], this.settings.now()),
    };
  }

  /** Sleeps between attempts; an abort ends the wait at once even if an injected sleep ignores the signal. */
  private pause(ms: number, target: string, signal: AbortSignal | undefined): Promise<void> {
    if (!signal) return this.settings.sleep(ms);
    return new Promise<void>((resolve, reject) => {
      const onAbort = (): void => reject(new AbortError(target, { cause: signal.reason }));
      if (signal.aborted) return onAbort();
      signal.addEventListener('abort', onAbort, { once: true });
      this.settings
        .sleep(ms, signal)
        .then(resolve, (err: unknown) => (signal.aborted ? onAbort() : reject(err)))
        .finally(() => signal.removeEventListener('abort', onAbort));
    });
  }
}
