import { deriveSecret } from './seed.js';

/** Failures the local service can inject on API routes, so clients can prove their retries. */
export interface FaultOptions {
  /** Probability of a bare 429 (no body), per API request. */
  p429?: number;
  /** Probability of a 500 {"status":"unknown","message":"Injected fault"}, per API request. */
  p500?: number;
  /** Probability of destroying the connection without an answer, per API request. */
  pDrop?: number;
  /** Delay before every API answer, ms. */
  latencyMs?: number;
  /** Identity-map items admitted per second (token bucket over v2 + v3 map); over it -> bare 429. */
  rateLimitItemsPerS?: number;
}

export type InjectedFault = 'drop' | '429' | '500';

/**
 * A small seeded PRNG (sfc32): the same seed and the same request sequence give the same faults, so a
 * failing run can be replayed.
 */
class SeededRandom {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  constructor(seedBytes: Buffer) {
    this.a = seedBytes.readUInt32BE(0);
    this.b = seedBytes.readUInt32BE(4);
    this.c = seedBytes.readUInt32BE(8);
    this.d = seedBytes.readUInt32BE(12) | 1;
    for (let i = 0; i < 12; i++) this.next();
  }

  /** Uniform in [0, 1). */
  next(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0;
    this.d = (this.d + 1) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) | 0;
    return (t >>> 0) / 4294967296;
  }
}

export class FaultInjector {
  private readonly random: SeededRandom;
  private readonly pDrop: number;
  private readonly p429: number;
  private readonly p500: number;
  readonly latencyMs: number;
  private readonly ratePerS: number;
  private readonly burst: number;
  private tokens: number;
  private refilledAt: number;

  constructor(
    options: FaultOptions,
    seed: string,
    maxMapItems: number,
    private readonly realNow: () => number = () => performance.now(),
  ) {
    this.random = new SeededRandom(deriveSecret(seed, 'fault-draws', 16));
    this.pDrop = options.pDrop ?? 0;
    this.p429 = options.p429 ?? 0;
    this.p500 = options.p500 ?? 0;
    this.latencyMs = options.latencyMs ?? 0;
    this.ratePerS = options.rateLimitItemsPerS ?? 0;
    // A full batch must be able to pass eventually, whatever the rate.
    this.burst = Math.max(this.ratePerS, maxMapItems);
    this.tokens = this.burst;
    this.refilledAt = this.realNow();
  }

  /** One draw per API request: which injected failure, if any, answers it. */
  draw(): InjectedFault | null {
    if (this.pDrop === 0 && this.p429 === 0 && this.p500 === 0) return null;
    const x = this.random.next();
    if (x < this.pDrop) return 'drop';
    if (x < this.pDrop + this.p429) return '429';
    if (x < this.pDrop + this.p429 + this.p500) return '500';
    return null;
  }

  /** Token bucket over identity-map items, in real time (it models a gateway, not the simulated day). */
  admitMapItems(count: number): boolean {
    if (this.ratePerS <= 0) return true;
    const now = this.realNow();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.refilledAt) / 1000) * this.ratePerS);
    this.refilledAt = now;
    if (count > this.tokens) return false;
    this.tokens -= count;
    return true;
  }
}

/** A message for the first invalid fault option, or null. */
export function checkFaultOptions(options: FaultOptions): string | null {
  const probabilities: [string, number | undefined][] = [
    ['p429', options.p429],
    ['p500', options.p500],
    ['pDrop', options.pDrop],
  ];
  for (const [name, p] of probabilities) {
    if (p !== undefined && !(Number.isFinite(p) && p >= 0 && p <= 1))
      return `fault ${name} must be a probability between 0 and 1`;
  }
  const sum = (options.p429 ?? 0) + (options.p500 ?? 0) + (options.pDrop ?? 0);
  if (sum > 1) return 'the fault probabilities (429, 500, drop) add up to more than 1';
  if (options.latencyMs !== undefined && !(Number.isFinite(options.latencyMs) && options.latencyMs >= 0)) {
    return 'fault latencyMs must be a number of milliseconds >= 0';
  }
  if (
    options.rateLimitItemsPerS !== undefined &&
    !(Number.isFinite(options.rateLimitItemsPerS) && options.rateLimitItemsPerS >= 0)
  ) {
    return 'fault rateLimitItemsPerS must be a number of items per second >= 0 (0 = no limit)';
  }
  return null;
}
