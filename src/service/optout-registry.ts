/**
 * Who has opted out, as the local service knows it. An identity's opt-out is keyed on its first-level hash F,
 * so it survives salt rotation (docs/wire-protocol.md §8.4); the raw UIDs it had when it opted out are indexed
 * too, because /v2/optout/status looks raw UIDs up by exact string. An advertising_id opt-out names a raw UID
 * directly: it is reported by the status endpoint and makes any DII that maps to it (now or previously) opt out.
 * Times are Unix ms; when an identity opts out twice the earliest time is kept.
 */
export class OptoutRegistry {
  private readonly byFirstLevel = new Map<string, number>();
  private readonly byRawUid = new Map<string, number>();
  private readonly advertisingIds = new Map<string, number>();

  addIdentity(firstLevelB64: string, sinceMs: number, rawUidsNow: readonly string[]): void {
    keepEarliest(this.byFirstLevel, firstLevelB64, sinceMs);
    for (const rawUid of rawUidsNow) keepEarliest(this.byRawUid, rawUid, sinceMs);
  }

  addAdvertisingId(rawUid: string, sinceMs: number): void {
    keepEarliest(this.advertisingIds, rawUid, sinceMs);
    keepEarliest(this.byRawUid, rawUid, sinceMs);
  }

  hasFirstLevel(firstLevelB64: string): boolean {
    return this.byFirstLevel.size !== 0 && this.byFirstLevel.has(firstLevelB64);
  }

  /** Whether mapping has to compute raw UIDs before it can decide opt-out (only with advertising_id opt-outs). */
  get hasAdvertisingIdOptouts(): boolean {
    return this.advertisingIds.size !== 0;
  }

  hasAdvertisingId(rawUid: string): boolean {
    return this.advertisingIds.has(rawUid);
  }

  /** Opt-out time of a raw UID for /v2/optout/status, or undefined. */
  rawUidOptedOutSince(rawUid: string): number | undefined {
    return this.byRawUid.get(rawUid);
  }

  get size(): { identities: number; rawUids: number } {
    return { identities: this.byFirstLevel.size, rawUids: this.byRawUid.size };
  }
}

function keepEarliest(map: Map<string, number>, key: string, ms: number): void {
  const existing = map.get(key);
  if (existing === undefined || ms < existing) map.set(key, ms);
}
