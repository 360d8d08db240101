import { createHash } from 'node:crypto';
import type { OptedOutItem } from '../../src/protocol/index.js';
import { waitOrAbort } from './fake-endpoint.js';
import type { SweepState } from '../../src/pipeline/optout/optout-sweep.js';
import type { OptedOutRawUid, OptoutCandidate, OptoutCursor } from '../../src/state/types.js';

export function rawUid(n: number): string {
  return createHash('sha256').update(`raw-${n}`).digest('base64');
}

/** An opt-out endpoint that knows some raw UIDs and records every call and how many overlapped. */
export class FakeOptoutService {
  readonly calls: string[][] = [];
  inFlight = 0;
  peakInFlight = 0;
  private n = 0;

  constructor(
    private readonly optedOut: ReadonlyMap<string, number>,
    private readonly options: { latencyMs?: number; failOn?: (call: number) => Error | undefined } = {},
  ) {}

  readonly check = async (ids: string[], signal: AbortSignal): Promise<OptedOutItem[]> => {
    const call = ++this.n;
    this.calls.push([...ids]);
    this.inFlight++;
    this.peakInFlight = Math.max(this.peakInFlight, this.inFlight);
    try {
      await waitOrAbort(this.options.latencyMs ?? 0, signal);
      const failure = this.options.failOn?.(call);
      if (failure) throw failure;
      return ids.flatMap((id) => {
        const since = this.optedOut.get(id);
        return since === undefined ? [] : [{ advertising_id: id, opted_out_since: since }];
      });
    } finally {
      this.inFlight--;
    }
  };

  get sent(): string[] {
    return this.calls.flat();
  }
}

/** The sweep's part of the state file, in memory, with a log of what it was asked. */
export class FakeSweepState implements SweepState {
  readonly entries: {
    id: number;
    u: string | null;
    p: string | null;
    lastOptoutCheckS: number | null;
    status: 'mapped' | 'optout';
    optedOutSinceMs: number | null;
  }[] = [];
  readonly recorded: number[][] = [];
  readonly tombstoneCalls: { optedOut: OptedOutRawUid[]; within: readonly number[] | undefined }[] = [];
  readonly selections: { after: number; upTo: number; limit: number }[] = [];
  /** The sweep's saved cursor (meta sweep_after of a real state). */
  cursor = 0;

  add(u: string | null, p: string | null, lastOptoutCheckS: number | null = null): number {
    const id = this.entries.length + 1;
    this.entries.push({ id, u, p, lastOptoutCheckS, status: 'mapped', optedOutSinceMs: null });
    return id;
  }

  private withRawUid() {
    return this.entries.filter((e) => e.u !== null || e.p !== null);
  }

  selectForOptoutCheck(limit: number, after: OptoutCursor | null, upTo = Number.MAX_SAFE_INTEGER): OptoutCandidate[] {
    this.selections.push({ after: after?.id ?? 0, upTo, limit });
    // entries are kept in id order
    return this.withRawUid()
      .filter((e) => e.id > (after?.id ?? 0) && e.id <= upTo)
      .slice(0, limit)
      .map((e) => ({
        id: e.id,
        type: 'email' as const,
        hash: `hash-${e.id}`,
        u: e.u,
        p: e.p,
        lastOptoutCheckS: e.lastOptoutCheckS,
      }));
  }

  sweepCursor(): OptoutCursor {
    return { id: this.cursor };
  }

  countWithRawUid(): number {
    return this.withRawUid().length;
  }

  sweepSize(fraction: number): number {
    return Math.ceil(fraction * this.countWithRawUid());
  }

  recordOptoutChecks(ids: readonly number[], nowS: number, cursor?: OptoutCursor): void {
    this.recorded.push([...ids]);
    for (const id of ids) this.entries[id - 1].lastOptoutCheckS = nowS;
    if (cursor !== undefined) this.cursor = cursor.id;
  }

  tombstoneByRawUid(optedOut: readonly OptedOutRawUid[], _nowS: number, within?: readonly number[]): number {
    this.tombstoneCalls.push({ optedOut: [...optedOut], within });
    let n = 0;
    for (const e of this.entries) {
      if (within !== undefined && !within.includes(e.id)) continue;
      const hit = optedOut.find((o) => o.rawUid === e.u || o.rawUid === e.p);
      if (hit === undefined || e.status === 'optout') continue;
      Object.assign(e, { status: 'optout', u: null, p: null, optedOutSinceMs: hit.optedOutSinceMs });
      n++;
    }
    return n;
  }
}
