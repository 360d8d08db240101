import type { ServiceClock } from './contracts.js';

export const DAY_MS = 86_400_000;

/**
 * The local service's time: it starts at a chosen instant, runs at the speed of real time, and jumps when told
 * (POST /_local/clock), so rotation, r, p and token expiry can be exercised without waiting for days.
 */
export class SimulatedClock implements ServiceClock {
  private offsetMs: number;

  constructor(startMs: number, private readonly realNow: () => number = Date.now) {
    this.offsetMs = startMs - realNow();
  }

  nowMs(): number {
    return this.realNow() + this.offsetMs;
  }

  set(ms: number): number {
    this.offsetMs = ms - this.realNow();
    return this.nowMs();
  }
}

const HAS_ZONE = /(?:[zZ]|[+-]\d{2}(?::?\d{2})?)$/;
const DATE_ONLY = /^\d{4}-\d{2}-\d{2}$/;
const ISO_LIKE = /^\d{4}-\d{2}-\d{2}(?:[Tt ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:[zZ]|[+-]\d{2}(?::?\d{2})?)?)?$/;

/**
 * An instant given by a person: ISO 8601 (a zone-less date-time is UTC, like the API's own timestamps) or Unix
 * seconds as digits. Null when it is neither.
 */
export function parseInstantMs(text: string): number | null {
  const value = text.trim();
  if (/^\d{1,11}(?:\.\d{1,3})?$/.test(value)) return Math.round(Number(value) * 1000);
  if (!ISO_LIKE.test(value)) return null;
  const normalized = DATE_ONLY.test(value) || HAS_ZONE.test(value) ? value : `${value}Z`;
  const ms = Date.parse(normalized.replace(' ', 'T'));
  return Number.isFinite(ms) ? ms : null;
}
