/** What an answer makes of an entry of a PostgreSQL state: the file's rules (batch-commit.ts) on whole records. */
import type { StateRecord } from '../backend.js';
import { timeOrNull } from '../batch-commit.js';
import type { EntryUpdate } from '../types.js';

/** An entry not stored yet, before its first answer. */
export function freshRecord(u: Pick<EntryUpdate, 'type' | 'hash'>): StateRecord {
  return {
    type: u.type,
    hash: u.hash,
    status: 'invalid',
    due: false,
    u: null,
    p: null,
    r: null,
    bucketId: null,
    lastMappedS: null,
    lastOptoutCheckS: null,
    optedOutSinceMs: null,
  };
}

/**
 * An entry after an answer. Mapped: its raw UIDs, r and bucket, mapped now, no longer opted out or due. Opted
 * out: a tombstone, which keeps its hash, last mapped time and last check and loses every raw UID (and keeps its
 * opted-out time when the answer does not say). Invalid: the same, keeping the opted-out time.
 */
export function answered(old: StateRecord, update: EntryUpdate, nowS: number): StateRecord {
  const o = update.outcome;
  // every record made whole, in one shape: a spread of `old` would cost a copy of its properties one by one
  switch (o.kind) {
    case 'mapped':
      return {
        type: old.type,
        hash: old.hash,
        status: 'mapped',
        due: false,
        u: typeof o.u === 'string' ? o.u : null,
        p: typeof o.p === 'string' ? o.p : null,
        r: timeOrNull(o.r),
        bucketId: typeof o.bucketId === 'string' ? o.bucketId : null,
        lastMappedS: nowS,
        lastOptoutCheckS: old.lastOptoutCheckS,
        optedOutSinceMs: null,
      };
    case 'optout':
      return {
        type: old.type,
        hash: old.hash,
        status: 'optout',
        due: false,
        u: null,
        p: null,
        r: null,
        bucketId: null,
        lastMappedS: old.lastMappedS,
        lastOptoutCheckS: old.lastOptoutCheckS,
        optedOutSinceMs: timeOrNull(o.optedOutSinceMs) ?? old.optedOutSinceMs,
      };
    case 'invalid':
      return {
        type: old.type,
        hash: old.hash,
        status: 'invalid',
        due: false,
        u: null,
        p: null,
        r: null,
        bucketId: null,
        lastMappedS: old.lastMappedS,
        lastOptoutCheckS: old.lastOptoutCheckS,
        optedOutSinceMs: old.optedOutSinceMs,
      };
    default:
      throw new TypeError(`commitBatch: unknown outcome '${(o as { kind: unknown }).kind}'`);
  }
}
