import type { ServiceClock } from './contracts.js';

export const DAY_MS = 86_400_000;

/**
 * The local service's two times.
 *
 * Identity time (`nowMs`, the ServiceClock contract) drives everything the service computes about identities:
 * salt buckets and their rotation, `r` and `p`, token lifetimes and expiry, opt-out times, the buckets endpoint and
 * the stats' now_ms. It starts at a chosen instant, runs at real speed and jumps on POST /_local/clock, so the
 * nightly flow can be exercised over simulated days without waiting for them.
 *
 * Envelope time (`envelopeNowMs`) is the service's wall clock as a client sees it: what request-envelope timestamps
 * are checked against (the ±2 minute window) and what response envelopes carry. It is real time plus the offset of
 * the start instant, and never jumps afterwards. So a service started with a skewed start (`--now` 10 minutes
 * ahead) stands for an operator whose clock is off, while moving identity time by days later leaves a client on the
 * real clock working: on the real operator, days pass for the client too.
 */
export class SimulatedClock implements ServiceClock {
  private identityOffsetMs: number;
  private readonly envelopeOffsetMs: number;

  constructor(
    startMs: number,
    private readonly realNow: () => number = Date.now,
  ) {
    this.identityOffsetMs = startMs - realNow();
    this.envelopeOffsetMs = this.identityOffsetMs;
  }

  /** Identity time, Unix ms. */
  nowMs(): number {
    return this.realNow() + this.identityOffsetMs;
  }

  /** Envelope time, Unix ms: real time plus the start offset, untouched by set(). */
  envelopeNowMs(): number {
    return this.realNow() + this.envelopeOffsetMs;
  }

  /** Moves identity time only; answers the new identity time. */
  set(ms: number): number {
    this.identityOffsetMs = ms - this.realNow();
    return this.nowMs();
  }
}
