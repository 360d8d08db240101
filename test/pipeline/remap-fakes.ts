import { createHash } from 'node:crypto';
import type { DiiType } from '../../src/identity/index.js';
import type { MapV3Item, MapV3Request, MapV3ResponseBody } from '../../src/protocol/index.js';
import type { RemapState } from '../../src/pipeline/remap/remap-engine.js';
import type { DueCursor, DueEntry, EntryUpdate } from '../../src/state/types.js';
import { answerHashes, waitOrAbort } from './fake-endpoint.js';
import type { StoredEntry } from '../state/lookups.js';

export const DAY_S = 86_400;
export const NOW_S = 1_800_000_000;

export type FakeEntry = Pick<StoredEntry, 'id' | 'type' | 'hash' | 'status' | 'u' | 'p' | 'r' | 'lastMappedS'>;

export function hashOf(n: number): string {
  return createHash('sha256').update(`entry-${n}`).digest('base64');
}

export function uidOf(text: string): string {
  return createHash('sha256').update(`uid:${text}`).digest('base64');
}

/** An in-memory state with remap's two calls; keeps a log so tests can see every page and commit. */
export class FakeRemapState implements RemapState {
  readonly entries: FakeEntry[] = [];
  readonly pages: { nowS: number; after: DueCursor | null; limit: number; returned: number }[] = [];
  readonly commits: { updates: EntryUpdate[]; nowS: number }[] = [];
  /** Throw on the n-th commit (1-based). */
  failCommitOn?: number;

  add(
    type: DiiType,
    hash: string,
    r: number,
    u: string = uidOf(`${type}:${hash}:0`),
    p: string | null = null,
  ): FakeEntry {
    const entry: FakeEntry = { id: this.entries.length + 1, type, hash, status: 'mapped', u, p, r, lastMappedS: null };
    this.entries.push(entry);
    return entry;
  }

  selectDue(nowS: number, after: DueCursor | null, limit: number): DueEntry[] {
    const due = this.entries
      .filter((e) => e.r !== null && e.r <= nowS)
      .filter(
        (e) =>
          after === null || (e.r as number) > (after.r as number) || ((e.r as number) === after.r && e.id > after.id),
      )
      .sort((a, b) => (a.r as number) - (b.r as number) || a.id - b.id)
      .slice(0, limit)
      .map((e) => ({ id: e.id, type: e.type, hash: e.hash, u: e.u, p: e.p, r: e.r, bucketId: null }));
    this.pages.push({ nowS, after, limit, returned: due.length });
    return due;
  }

  commitBatch(updates: readonly EntryUpdate[], nowS: number): void {
    if (this.failCommitOn !== undefined && this.commits.length + 1 === this.failCommitOn)
      throw new Error('disk I/O error');
    this.commits.push({ updates: [...updates], nowS });
    for (const update of updates) {
      const entry = this.entries.find((e) => e.type === update.type && e.hash === update.hash);
      if (!entry) throw new Error('commit of an unknown entry');
      entry.lastMappedS = nowS;
      const o = update.outcome;
      if (o.kind === 'mapped') Object.assign(entry, { status: 'mapped', u: o.u, p: o.p, r: o.r });
      else Object.assign(entry, { status: o.kind, u: null, p: null, r: null });
    }
  }

  due(nowS: number): FakeEntry[] {
    return this.entries.filter((e) => e.r !== null && e.r <= nowS);
  }
}

export interface FakeRemapperOptions {
  answer: (type: DiiType, hash: string) => MapV3Item;
  latencyMs?: () => number;
  failOn?: (call: number) => Error | undefined;
}

/** A v3 mapper that answers per hash and records what was sent and how many calls were in flight at once. */
export class FakeRemapper {
  readonly requests: MapV3Request[] = [];
  inFlight = 0;
  peakInFlight = 0;
  private calls = 0;

  constructor(private readonly options: FakeRemapperOptions) {}

  readonly mapBatch = async (request: MapV3Request, signal: AbortSignal): Promise<MapV3ResponseBody> => {
    const call = ++this.calls;
    this.inFlight++;
    this.peakInFlight = Math.max(this.peakInFlight, this.inFlight);
    try {
      this.requests.push(request);
      const ms = this.options.latencyMs?.() ?? 0;
      await waitOrAbort(ms, signal);
      const failure = this.options.failOn?.(call);
      if (failure) throw failure;
      return answerHashes(request, this.options.answer);
    } finally {
      this.inFlight--;
    }
  };

  get hashesSent(): string[] {
    return this.requests.flatMap((r) => [...(r.email_hash ?? []), ...(r.phone_hash ?? [])]);
  }
}
