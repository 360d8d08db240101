import { isMappedV3, type MappedV3, type MapV3Item } from '../../protocol/index.js';
import type { MapOutcome } from '../../state/types.js';

/**
 * A v2 answer in the shape the map and remap engines carry (a MappedV3), so that v2 needs no engine of its own:
 * the raw UID and the salt bucket it was made with. v2 has no refresh time: the entry is due when its bucket
 * rotates, never by the clock. So `r` is +Infinity to anything that compares it with now (never due by time),
 * `p` is null (v2 has no previous raw ID), and the state stores the bucket instead of `r`.
 */
export class BucketAnswer implements MappedV3 {
  readonly p: null = null;
  readonly r: number = Number.POSITIVE_INFINITY;

  constructor(
    readonly u: string,
    readonly bucketId: string,
    /** Answered by the state file, not by the service (the map summary counts those apart). */
    readonly fromState: boolean = false,
  ) {}
}

export function isBucketAnswer(item: MapV3Item | null): item is BucketAnswer {
  return item instanceof BucketAnswer;
}

/** What a mapped answer writes to the state: `r` for v3, the salt bucket (and no `r`) for v2. */
export function mappedOutcome(item: MappedV3): Extract<MapOutcome, { kind: 'mapped' }> {
  if (item instanceof BucketAnswer) return { kind: 'mapped', u: item.u, p: null, r: null, bucketId: item.bucketId };
  return { kind: 'mapped', u: item.u, p: item.p, r: item.r };
}

/** The salt bucket of an answer, or null for a v3 answer and for anything not mapped. */
export function bucketIdOf(item: MapV3Item | null): string | null {
  return item !== null && isMappedV3(item) && item instanceof BucketAnswer ? item.bucketId : null;
}
