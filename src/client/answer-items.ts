import { isRawUid } from '../protocol/index.js';

/**
 * The wire contract of one answer item (docs/wire-protocol.md §5.8), checked where the answer is read so that the
 * pipeline only ever sees items it can store. Each check returns what is wrong (naming fields and rules, never a
 * value: answers hold raw UIDs) or undefined; the caller adds which item it was.
 */

const DAY_S = 86_400;

/**
 * Earliest acceptable `r`: 2020-01-01T00:00:00Z. The service never answers an `r` in its own past (it falls back to
 * the next midnight), and no identity service ran before 2020, so anything earlier is not a time it could mean.
 */
export const REFRESH_FROM_FLOOR_S = 1_577_836_800;

/**
 * Latest acceptable `r`, ahead of this machine's clock. `r` is a salt bucket's next refresh, at most about a month
 * after the service's clock, and a service whose envelopes we accept keeps a clock within 2 minutes of ours. The
 * five years of room cover a local service whose identity time was moved ahead; what lies beyond (milliseconds sent
 * as seconds, 1e300) would keep an entry from ever coming due again.
 */
export const REFRESH_FROM_MAX_AHEAD_S = 5 * 366 * DAY_S;

/** Latest acceptable opted_out_since (ms) ahead of this machine's clock, for the same reason as `r`. */
export const OPTED_OUT_SINCE_MAX_AHEAD_MS = REFRESH_FROM_MAX_AHEAD_S * 1000;

/** The reasons an identifier is not mapped; any other `e` or v2 `reason` is a contract break. */
const UNMAPPED_REASONS: ReadonlySet<unknown> = new Set(['optout', 'invalid identifier']);

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The window `r` must fall in, from this machine's clock. */
export interface RefreshWindow {
  minS: number;
  maxS: number;
}

export function refreshWindow(nowMs: number): RefreshWindow {
  return { minS: REFRESH_FROM_FLOOR_S, maxS: Math.floor(nowMs / 1000) + REFRESH_FROM_MAX_AHEAD_S };
}

/** A v3 item: `{u, p, r}` with u a raw UID, p null or a raw UID, r whole seconds in the window; or `{e}`. */
export function v3ItemProblem(item: unknown, window: RefreshWindow): string | undefined {
  if (!isRecord(item)) return 'is not an object';
  const u = item.u;
  if (u === undefined) {
    if (UNMAPPED_REASONS.has(item.e)) return undefined;
    return item.e === undefined ? 'has neither "u" nor "e"' : 'has an "e" other than "optout" or "invalid identifier"';
  }
  if (item.e !== undefined) return 'has both "u" and "e"';
  if (!isRawUid(u)) return 'has a "u" that is not a raw UID (44 base64 characters)';
  const p = item.p;
  if (p !== null && !isRawUid(p)) return 'has a "p" that is neither null nor a raw UID';
  const r = item.r;
  if (typeof r !== 'number' || !Number.isInteger(r) || r < window.minS || r > window.maxS) {
    return 'has an "r" that is not a refresh time in whole Unix seconds between 2020 and five years from now';
  }
  return undefined;
}

/** A v2 mapped item: identifier (a string), advertising_id (a raw UID), bucket_id (a non-empty string). */
export function v2MappedProblem(item: unknown): string | undefined {
  if (!isRecord(item)) return 'is not an object';
  if (typeof item.identifier !== 'string') return 'has no "identifier"';
  if (!isRawUid(item.advertising_id)) return 'has an "advertising_id" that is not a raw UID (44 base64 characters)';
  if (typeof item.bucket_id !== 'string' || item.bucket_id === '') return 'has no "bucket_id"';
  return undefined;
}

/** A v2 unmapped item: identifier (a string), reason "optout" or "invalid identifier". */
export function v2UnmappedProblem(item: unknown): string | undefined {
  if (!isRecord(item)) return 'is not an object';
  if (typeof item.identifier !== 'string') return 'has no "identifier"';
  if (!UNMAPPED_REASONS.has(item.reason)) return 'has a "reason" other than "optout" or "invalid identifier"';
  return undefined;
}

/** An opt-out item: advertising_id one of the raw UIDs sent, opted_out_since whole ms from 0 to the window's end. */
export function optedOutProblem(item: unknown, sent: ReadonlySet<string>, maxMs: number): string | undefined {
  if (!isRecord(item)) return 'is not an object';
  const id = item.advertising_id;
  if (typeof id !== 'string' || !sent.has(id)) return 'has an "advertising_id" that was not sent';
  const since = item.opted_out_since;
  if (typeof since !== 'number' || !Number.isInteger(since) || since < 0 || since > maxMs) {
    return 'has an "opted_out_since" that is not a time in whole Unix milliseconds up to five years from now';
  }
  return undefined;
}

/** yyyy-MM-ddTHH:mm:ss.SSS, UTC with no zone: the one form the service writes a bucket's last_updated in. */
const LAST_UPDATED = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}$/;

/** A salt bucket: bucket_id a non-empty string, last_updated a real instant in the service's one form. */
export function bucketProblem(item: unknown): string | undefined {
  if (!isRecord(item)) return 'is not an object';
  if (typeof item.bucket_id !== 'string' || item.bucket_id === '') return 'has no "bucket_id"';
  const at = item.last_updated;
  if (typeof at !== 'string' || !LAST_UPDATED.test(at) || !Number.isFinite(Date.parse(`${at}Z`))) {
    return 'has no "last_updated" of the form yyyy-MM-ddTHH:mm:ss.SSS';
  }
  return undefined;
}

/** A token identity time (identity_expires, refresh_from, refresh_expires): whole Unix milliseconds, not negative. */
export function identityTimeProblem(value: unknown): string | undefined {
  if (typeof value !== 'number') return 'is not a number';
  return Number.isSafeInteger(value) && value >= 0 ? undefined : 'is not a time in whole Unix milliseconds';
}
