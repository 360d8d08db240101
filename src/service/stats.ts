/** What the local service has seen: requests and identifiers per path, and the faults it injected. */
export interface ServiceStatsSnapshot {
  requests: Record<string, number>;
  items: Record<string, number>;
  faults: { drop: number; '429': number; '500': number; rateLimited: number };
  nowMs: number;
}

// Random paths (a fuzzer, a scanner) must not grow the table without bound.
const MAX_PATHS = 256;
const OTHER_PATHS = '(other)';

export class ServiceStats {
  private readonly requests = new Map<string, number>();
  private readonly items = new Map<string, number>();
  private readonly faults = { drop: 0, '429': 0, '500': 0, rateLimited: 0 };

  countRequest(path: string): void {
    bump(this.requests, path, 1);
  }

  countItems(path: string, n: number): void {
    if (n > 0) bump(this.items, path, n);
  }

  countFault(kind: keyof ServiceStatsSnapshot['faults']): void {
    this.faults[kind]++;
  }

  snapshot(nowMs: number): ServiceStatsSnapshot {
    return {
      requests: Object.fromEntries(this.requests),
      items: Object.fromEntries(this.items),
      faults: { ...this.faults },
      nowMs,
    };
  }
}

function bump(map: Map<string, number>, path: string, n: number): void {
  const key = map.has(path) || map.size < MAX_PATHS ? path : OTHER_PATHS;
  map.set(key, (map.get(key) ?? 0) + n);
}
