// Whole stored entries in tests: found through lookupStored (the lookup the jobs make), their values read from
// the records on the store's own connection, so that the batches of an open group are seen too.
import type BetterSqlite3 from 'better-sqlite3';
import type { DiiType } from '../../src/identity/index.js';
import { EntryView } from '../../src/state/entry-record.js';
import type { StateStore } from '../../src/state/index.js';
import { TYPE_OF_CODE, statusOfCode } from '../../src/state/schema.js';
import type { EntryStatus } from '../../src/state/types.js';

/** One stored entry, every value of its record, with its row id. */
export interface StoredEntry {
  id: number;
  type: DiiType;
  hash: string;
  status: EntryStatus;
  u: string | null;
  p: string | null;
  r: number | null;
  bucketId: string | null;
  lastMappedS: number | null;
  lastOptoutCheckS: number | null;
  optedOutSinceMs: number | null;
  due: boolean;
}

type Store = Pick<StateStore, 'lookupStored'>;

const orNull = (t: number): number | null => (Number.isNaN(t) ? null : t);

/** Every entry of the store's file, keyed `${type}:${hash}`, read through the store's own connection. */
function entriesOf(s: Store): Map<string, StoredEntry> {
  const db = (s as unknown as { db: BetterSqlite3.Database }).db;
  const view = new EntryView();
  const out = new Map<string, StoredEntry>();
  for (const [id, record] of db.prepare('SELECT id, record FROM entries').raw().iterate() as Iterable<
    [number, Buffer]
  >) {
    view.read(record, 0);
    const e: StoredEntry = {
      id,
      type: TYPE_OF_CODE[view.type],
      hash: view.text(view.hashStart, view.hashSize) ?? '',
      status: statusOfCode(view.status),
      u: view.text(view.uStart, view.uSize),
      p: view.text(view.pStart, view.pSize),
      r: orNull(view.r),
      bucketId: view.text(view.bucketStart, view.bucketSize),
      lastMappedS: orNull(view.lastMappedS),
      lastOptoutCheckS: orNull(view.lastOptoutCheckS),
      optedOutSinceMs: orNull(view.optedOutSinceMs),
      due: view.due === 1,
    };
    out.set(`${e.type}:${e.hash}`, e);
  }
  return out;
}

/** Adds to `out` the entries lookupStored finds of these hashes of one type, keyed by `keyOf(hash)`. */
function found(
  s: Store,
  type: DiiType,
  hashes: readonly string[],
  entries: () => Map<string, StoredEntry>,
  keyOf: (hash: string) => string,
  out: Map<string, StoredEntry>,
): void {
  const stored = s.lookupStored(type, hashes);
  for (const i of stored.at) {
    const e = entries().get(`${type}:${hashes[i]}`);
    if (e === undefined) throw new Error(`lookupStored found ${type}:${hashes[i]}, which no record holds`);
    out.set(keyOf(hashes[i]), e);
  }
}

/** The stored entries of these hashes of one DII type, keyed by hash; hashes not stored are absent. */
export function lookupHashes(s: Store, type: DiiType, hashes: readonly string[]): Map<string, StoredEntry> {
  const out = new Map<string, StoredEntry>();
  let entries: Map<string, StoredEntry> | undefined;
  found(
    s,
    type,
    hashes,
    () => (entries ??= entriesOf(s)),
    (h) => h,
    out,
  );
  return out;
}

/** The stored entries of these keys, keyed `${type}:${hash}`; keys not stored are absent. */
export function lookupMany(s: Store, keys: readonly { type: DiiType; hash: string }[]): Map<string, StoredEntry> {
  const out = new Map<string, StoredEntry>();
  let entries: Map<string, StoredEntry> | undefined;
  for (const type of ['email', 'phone'] as const) {
    const hashes = keys.filter((k) => k.type === type).map((k) => k.hash);
    if (hashes.length > 0)
      found(
        s,
        type,
        hashes,
        () => (entries ??= entriesOf(s)),
        (h) => `${type}:${h}`,
        out,
      );
  }
  return out;
}

/** The store's entries by status (a read of every record). */
export function countsOf(s: Store): { entries: number; mapped: number; optout: number; invalid: number } {
  const counts = { entries: 0, mapped: 0, optout: 0, invalid: 0 };
  for (const e of entriesOf(s).values()) {
    counts.entries++;
    counts[e.status]++;
  }
  return counts;
}

/** The entries of these hashes of one type as the records hold them, keyed by hash, without lookupStored. */
export function entriesByHash(s: Store, type: DiiType, hashes: readonly string[]): Map<string, StoredEntry> {
  const entries = entriesOf(s);
  const out = new Map<string, StoredEntry>();
  for (const hash of hashes) {
    const e = entries.get(`${type}:${hash}`);
    if (e !== undefined) out.set(hash, e);
  }
  return out;
}
