import type { DiiType } from '../identity/index.js';

export type EntryStatus = 'mapped' | 'optout' | 'invalid';

/** One stored identifier. Never holds a raw email or phone: the hash is all a remap needs. */
export interface StateEntry {
  type: DiiType;
  hash: string;
  status: EntryStatus;
  /** Current raw UID; null for tombstones (optout) and invalids. */
  u: string | null;
  /** Previous raw UID (v3 `p`), null when none. */
  p: string | null;
  /** v3 refresh time, Unix seconds; null for tombstones, invalids and v2 entries. */
  r: number | null;
  /** v2 salt bucket id; null for v3 entries. */
  bucketId: string | null;
  /** Unix seconds. */
  firstMappedS: number | null;
  lastMappedS: number | null;
  lastOptoutCheckS: number | null;
  /** When the service says the raw UID opted out (ms), if known. */
  optedOutSinceMs: number | null;
  /** v2: set when the entry's bucket rotated after it was mapped. */
  due: boolean;
}

export type MapOutcome =
  | { kind: 'mapped'; u: string; p: string | null; r: number | null; bucketId?: string | null }
  | { kind: 'optout' }
  | { kind: 'invalid' };

export interface EntryUpdate {
  type: DiiType;
  hash: string;
  outcome: MapOutcome;
}

export interface DueEntry {
  id: number;
  type: DiiType;
  hash: string;
  u: string | null;
  p: string | null;
  r: number | null;
  bucketId: string | null;
}

export interface StateMeta {
  schemaVersion: number;
  /** Base URL + identity scope the file was made with; integ and prod IDs are never mixed. */
  envFingerprint: string;
  api: 'v3' | 'v2';
  createdAt: string;
}

export interface OpenStateOptions {
  /** Refuse a file made for another environment. */
  envFingerprint: string;
  /** API the entries come from when the file is created (default v3). */
  api?: 'v3' | 'v2';
  /** Create the file when missing (default true). */
  create?: boolean;
  /** Read-only (dry runs). */
  readonly?: boolean;
}
