import pLimit, { type LimitFunction } from 'p-limit';

export interface AdaptiveConcurrencyOptions {
  /** The ceiling: --concurrency (at most 20 against the public service). */
  max: number;
  /** Never below this (default 1). */
  min?: number;
  /** Successful batches in a row, with no 429 among them, before one more request may be in flight (default 4). */
  raiseEvery?: number;
  /**
   * After a halving, further 429s within this time do not halve again (default 1,000 ms): a burst of 429s answers
   * the requests already in flight at the old level, and must not be counted once per request.
   */
  cooldownMs?: number;
  /** Clock in ms (default Date.now); injectable for tests. */
  now?: () => number;
}

/**
 * At most N requests in flight, with N adapting to the service's rate limiter: a 429 halves it (the client
 * reports each 429 through its onRetry event, before it sleeps and retries), and every few successful batches
 * raise it by one, back up to the ceiling. Built on p-limit, whose `concurrency` can be changed while running:
 * lowering it lets requests already in flight finish but starts no new one until the count is under it.
 */
export class AdaptiveConcurrency {
  readonly max: number;
  readonly min: number;
  private readonly raiseEvery: number;
  private readonly cooldownMs: number;
  private readonly now: () => number;
  private readonly limit: LimitFunction;
  private successStreak = 0;
  private lastHalvedAt = Number.NEGATIVE_INFINITY;
  private inFlight = 0;
  /** Highest number of tasks that were running at once; for tests and the summary. */
  peakInFlight = 0;
  /** How many times the level was halved. */
  halvings = 0;

  constructor(options: AdaptiveConcurrencyOptions) {
    if (!Number.isInteger(options.max) || options.max < 1)
      throw new RangeError('concurrency must be a whole number of at least 1');
    this.max = options.max;
    this.min = Math.max(1, Math.min(options.min ?? 1, this.max));
    this.raiseEvery = Math.max(1, options.raiseEvery ?? 4);
    this.cooldownMs = Math.max(0, options.cooldownMs ?? 1000);
    this.now = options.now ?? Date.now;
    this.limit = pLimit(this.max);
  }

  /** The current level: how many requests may be in flight now. */
  get concurrency(): number {
    return this.limit.concurrency;
  }

  /** Tasks running now. */
  get active(): number {
    return this.inFlight;
  }

  /** Tasks waiting for a free place. */
  get queued(): number {
    return this.limit.pendingCount;
  }

  /** Runs `task` once fewer than `concurrency` tasks are running. */
  run<T>(task: () => Promise<T>): Promise<T> {
    return this.limit(async () => {
      this.inFlight++;
      if (this.inFlight > this.peakInFlight) this.peakInFlight = this.inFlight;
      try {
        return await task();
      } finally {
        this.inFlight--;
      }
    });
  }

  /** The service answered 429: halve the level (once per cooldown). */
  rateLimited(): void {
    this.successStreak = 0;
    const t = this.now();
    if (t - this.lastHalvedAt < this.cooldownMs) return;
    this.lastHalvedAt = t;
    const next = Math.max(this.min, Math.floor(this.limit.concurrency / 2));
    if (next !== this.limit.concurrency) {
      this.limit.concurrency = next;
      this.halvings++;
    }
  }

  /** A batch was answered: after `raiseEvery` of them in a row, allow one more in flight. */
  succeeded(): void {
    if (++this.successStreak < this.raiseEvery) return;
    this.successStreak = 0;
    if (this.limit.concurrency < this.max) this.limit.concurrency = this.limit.concurrency + 1;
  }

  /** Forwards the client's retry events: only 429 lowers the level (5xx and network errors are not a rate signal). */
  readonly onRetry = (event: { httpStatus?: number }): void => {
    if (event.httpStatus === 429) this.rateLimited();
  };
}
