/** What an answer makes of an entry of a PostgreSQL state: the file's rules (batch-commit.ts) on whole records. */
import type { StateRecord } from '../backend.js';
import { timeOrNull } from '../batch-commit.js';
import type { EntryUpdate } from '../types.js';

/**
 * An entry (null: one not stored yet) after an answer for its key. Mapped: its raw UIDs, r and bucket, mapped now,
 * no longer opted out or due. Opted out: a tombstone, which keeps its hash, last mapped time and last check and loses
 * every raw UID (and keeps its opted-out time when the answer does not say). Invalid: the same, keeping the opted-out
 * time.
 */
export function answered(old: StateRecord | null, update: EntryUpdate, nowS: number): StateRecord {
  const o = update.outcome;
  const kind: string = o.kind;
  if (kind !== 'mapped' && kind !== 'optout' && kind !== 'invalid')
    throw new TypeError(`commitBatch: unknown outcome '${kind}'`);
  // made whole, in one shape: a spread of `old` would copy its properties one at a time
  const m = o.kind === 'mapped' ? o : null;
  const before = old?.optedOutSinceMs ?? null;
  const since = o.kind === 'optout' ? (timeOrNull(o.optedOutSinceMs) ?? before) : before;
  return {
    type: update.type,
    hash: update.hash,
    status: o.kind,
    due: false,
    u: typeof m?.u === 'string' ? m.u : null,
    p: typeof m?.p === 'string' ? m.p : null,
    r: m === null ? null : timeOrNull(m.r),
    bucketId: typeof m?.bucketId === 'string' ? m.bucketId : null,
    lastMappedS: m === null ? (old?.lastMappedS ?? null) : nowS,
    lastOptoutCheckS: old?.lastOptoutCheckS ?? null,
    optedOutSinceMs: m === null ? since : null,
  };
}
