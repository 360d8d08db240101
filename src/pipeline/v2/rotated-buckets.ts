import { UnexpectedResponseError, type CallOptions, type ServiceClient } from '../../client/index.js';
import { PATHS } from '../../protocol/index.js';
import type { RotatedBucket } from '../../state/types.js';
import type { StateStore } from '../../state/index.js';

/**
 * The v2 salt-bucket check (docs/wire-protocol.md §5.5): ask which
 * buckets rotated since a time, and mark due the stored v2 entries whose bucket rotated after they were mapped.
 * The state remembers when it last checked, so the next check asks from there.
 */

/** The meta key of the last check (ISO 8601, UTC). */
export const LAST_BUCKETS_CHECK = 'last_buckets_check';

/**
 * A check is recorded this much before the time it was made. Asking for a stretch twice costs only a longer
 * answer (an entry is marked once, and only when mapped before the rotation); missing a stretch because this
 * machine's clock runs ahead of the service's would leave raw IDs stale until the bucket rotates again.
 */
export const CHECK_OVERLAP_MS = 60 * 60 * 1000;

/** What the check needs from the state file. */
export type BucketCheckState = Pick<StateStore, 'markBucketsRotated' | 'getMeta' | 'setMeta' | 'bucketEntries'>;

/**
 * since_timestamp as the service requires it: an ISO local date-time read as UTC, with no zone or offset
 * (a trailing Z fails there, docs/wire-protocol.md §5.5). Floored to the second: asking from a little earlier is safe.
 */
export function sinceTimestamp(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().slice(0, 19);
}

const LAST_UPDATED = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2})?)(?:\.(\d{1,9}))?(Z)?$/;

/** A bucket's last_updated (yyyy-MM-ddTHH:mm:ss.SSS, UTC, no zone) in Unix ms; null when it is not that. */
export function parseLastUpdated(text: string): number | null {
  const m = LAST_UPDATED.exec(text);
  if (m === null) return null;
  // without a zone, Date.parse would read local time; the service's times are UTC
  const ms = Date.parse(`${m[1]}${m[2] === undefined ? '' : `.${m[2].slice(0, 3).padEnd(3, '0')}`}Z`);
  return Number.isFinite(ms) ? ms : null;
}

/** An instant as the buckets output and the state's meta write it: ISO 8601 with Z, milliseconds. */
export function isoUtc(ms: number): string {
  return new Date(ms).toISOString();
}

/** POST /v2/identity/buckets: the buckets whose salt rotated at or after `sinceMs`, as the service lists them. */
export async function fetchRotatedBuckets(
  client: Pick<ServiceClient, 'buckets'>,
  sinceMs: number,
  options: CallOptions = {},
): Promise<RotatedBucket[]> {
  const answer = await client.buckets(sinceTimestamp(sinceMs), options);
  const out = new Array<RotatedBucket>(answer.length);
  for (let i = 0; i < answer.length; i++) {
    const item = answer[i];
    const lastUpdatedMs = typeof item?.last_updated === 'string' ? parseLastUpdated(item.last_updated) : null;
    if (typeof item?.bucket_id !== 'string' || lastUpdatedMs === null) {
      throw new UnexpectedResponseError(
        PATHS.buckets,
        `bucket ${i + 1} has no bucket_id or no last_updated of the form yyyy-MM-ddTHH:mm:ss.SSS`,
      );
    }
    out[i] = { bucketId: item.bucket_id, lastUpdatedMs };
  }
  return out;
}

/** When the state was last checked for rotated buckets (Unix ms), or null when never. */
export function lastCheckMs(state: Pick<StateStore, 'getMeta'>): number | null {
  const value = state.getMeta(LAST_BUCKETS_CHECK);
  if (value === null || value === '') return null;
  const hasZone = /(?:[zZ]|[+-]\d{2}:?\d{2})$/.test(value);
  const ms = Date.parse(hasZone ? value : `${value}Z`);
  return Number.isFinite(ms) ? ms : null;
}

/**
 * From when the next check must ask so that no rotation is missed: the last check, or, before the first one,
 * the time the oldest v2 entry was mapped. Null when there is nothing to check (no check and no v2 entries).
 */
export function nextCheckSinceMs(state: Pick<StateStore, 'getMeta' | 'bucketEntries'>): number | null {
  const last = lastCheckMs(state);
  if (last !== null) return last;
  const oldest = state.bucketEntries().oldestMappedS;
  return oldest === null ? null : oldest * 1000;
}

export interface BucketCheck {
  /** The time asked from, Unix ms. */
  sinceMs: number;
  /** The rotated buckets, as the service listed them. */
  buckets: RotatedBucket[];
  /** v2 entries newly marked due. */
  marked: number;
  /**
   * Whether the check time was recorded: only when the check covered everything since the last one (or since
   * the oldest entry), else a later check from it would skip the stretch in between.
   */
  recorded: boolean;
}

/**
 * Asks for the buckets rotated since `sinceMs`; with a state, marks due the v2 entries mapped before their
 * bucket's rotation and records the check (at `checkedAtMs` minus CHECK_OVERLAP_MS) when it covered everything
 * since the last one. Marking and recording are separate transactions: a crash in between only asks again.
 */
export async function checkRotatedBuckets(opts: {
  client: Pick<ServiceClient, 'buckets'>;
  sinceMs: number;
  /** The time of the check, Unix ms. */
  checkedAtMs: number;
  state?: BucketCheckState;
  signal?: AbortSignal;
}): Promise<BucketCheck> {
  const { state } = opts;
  const coverFrom = state === undefined ? null : nextCheckSinceMs(state);
  const buckets = await fetchRotatedBuckets(
    opts.client,
    opts.sinceMs,
    opts.signal !== undefined ? { signal: opts.signal } : {},
  );
  if (state === undefined) return { sinceMs: opts.sinceMs, buckets, marked: 0, recorded: false };
  const marked = state.markBucketsRotated(buckets);
  // sinceTimestamp floors to the second: compare what was really asked for
  const askedFromMs = Math.floor(opts.sinceMs / 1000) * 1000;
  const recorded = coverFrom === null || askedFromMs <= coverFrom;
  if (recorded) recordCheck(state, opts.checkedAtMs);
  return { sinceMs: opts.sinceMs, buckets, marked, recorded };
}

/** Records a check made at `checkedAtMs` (minus the overlap); never moves the recorded time back. */
export function recordCheck(state: Pick<StateStore, 'getMeta' | 'setMeta'>, checkedAtMs: number): void {
  const at = checkedAtMs - CHECK_OVERLAP_MS;
  const last = lastCheckMs(state);
  if (last !== null && last >= at) return;
  state.setMeta(LAST_BUCKETS_CHECK, isoUtc(at));
}
