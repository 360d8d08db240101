import { parseInstantMs } from '../protocol/index.js';
import { DAY_MS, type SimulatedClock } from './clock.js';
import type { LocalIdentityEngine } from './engine.js';
import { OPTOUT_FIELDS, applyOptout, isOptoutField, readOptoutSubject, readSinceMs } from './optout-input.js';
import type { ServiceStats } from './stats.js';

/**
 * The /_local/ routes: controls of the local service that no real operator has (clock, opt-outs, counters).
 * Plain JSON both ways, no envelope, no API key: they exist for tests and demos on loopback.
 */

export interface LocalAdminDeps {
  clock: SimulatedClock;
  engine: LocalIdentityEngine;
  stats: ServiceStats;
}

export interface AdminAnswer {
  http: number;
  json: Record<string, unknown>;
}

const notFound = (path: string): AdminAnswer => ({
  http: 404,
  json: { status: 'not_found', message: `No route ${path}` },
});
const badRequest = (message: string): AdminAnswer => ({ http: 400, json: { status: 'client_error', message } });
const methodNotAllowed = (allowed: string): AdminAnswer => ({
  http: 405,
  json: { status: 'method_not_allowed', message: `Use ${allowed}` },
});

export function handleLocalAdmin(method: string, path: string, body: Buffer, deps: LocalAdminDeps): AdminAnswer {
  switch (path) {
    case '/_local/stats': {
      const snapshot = deps.stats.snapshot(deps.clock.nowMs());
      return {
        http: 200,
        json: { requests: snapshot.requests, items: snapshot.items, faults: snapshot.faults, now_ms: snapshot.nowMs },
      };
    }
    case '/_local/clock':
      if (method === 'GET') return { http: 200, json: { now_ms: deps.clock.nowMs() } };
      if (method !== 'POST') return methodNotAllowed('GET or POST');
      return moveClock(body, deps.clock);
    case '/_local/optout':
      if (method !== 'POST') return methodNotAllowed('POST');
      return addOptout(body, deps);
    default:
      return notFound(path);
  }
}

function readObject(body: Buffer): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(body.toString('utf8'));
    return value !== null && typeof value === 'object' && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : null;
  } catch {
    return null;
  }
}

// Every time the service writes (envelopes, ISO dates) must stay a valid date with a 4-digit year.
const CLOCK_MAX_MS = Date.UTC(9999, 11, 31);
const CLOCK_RANGE = 'the clock must stay between 1970-01-01 and 9999-12-31';

function inClockRange(ms: number): boolean {
  return ms >= 0 && ms <= CLOCK_MAX_MS;
}

function moveClock(body: Buffer, clock: SimulatedClock): AdminAnswer {
  const request = readObject(body);
  const usage = 'send {"advance_days": N} or {"set": "2026-01-01T00:00:00Z"} (ISO 8601, or Unix ms as a number)';
  if (request === null) return badRequest(`the body must be a JSON object: ${usage}`);
  const hasAdvance = request.advance_days !== undefined;
  const hasSet = request.set !== undefined;
  if (hasAdvance === hasSet) return badRequest(usage);
  if (hasAdvance) {
    const days = request.advance_days;
    if (typeof days !== 'number' || !Number.isFinite(days))
      return badRequest(`advance_days must be a number; ${usage}`);
    const target = clock.nowMs() + Math.round(days * DAY_MS);
    if (!inClockRange(target)) return badRequest(CLOCK_RANGE);
    return { http: 200, json: { now_ms: clock.set(target) } };
  }
  const target =
    typeof request.set === 'number'
      ? request.set
      : typeof request.set === 'string'
        ? parseInstantMs(request.set)
        : null;
  if (target === null || !Number.isFinite(target))
    return badRequest(`set must be an ISO 8601 date-time or Unix ms; ${usage}`);
  if (!inClockRange(target)) return badRequest(CLOCK_RANGE);
  return { http: 200, json: { now_ms: clock.set(Math.floor(target)) } };
}

function addOptout(body: Buffer, deps: LocalAdminDeps): AdminAnswer {
  const request = readObject(body);
  const usage = `send one of ${OPTOUT_FIELDS.map((f) => `{"${f}": "..."}`).join(', ')}, optionally with "since_ms"`;
  if (request === null) return badRequest(`the body must be a JSON object: ${usage}`);
  const fields = Object.keys(request).filter(isOptoutField);
  const unknown = Object.keys(request).filter((k) => k !== 'since_ms' && !isOptoutField(k));
  if (unknown.length > 0) return badRequest(`unknown field ${JSON.stringify(unknown[0])}; ${usage}`);
  if (fields.length !== 1) return badRequest(`name exactly one identity; ${usage}`);
  const field = fields[0]!;
  const value = request[field];
  if (typeof value !== 'string') return badRequest(`${field} must be a string`);
  const read = readOptoutSubject(field, value);
  if (!read.ok) return badRequest(read.reason);
  const now = deps.clock.nowMs();
  let sinceMs = now;
  if (request.since_ms !== undefined) {
    const parsed = readSinceMs(request.since_ms);
    if (parsed === null) return badRequest('since_ms must be whole Unix milliseconds >= 0');
    sinceMs = parsed;
  }
  applyOptout(deps.engine, read.subject, sinceMs, now);
  return { http: 200, json: { ok: true } };
}
