import { createHash } from 'node:crypto';
import type { OptedOutItem } from '../../src/protocol/index.js';

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
      await new Promise<void>((resolve, reject) => {
        const onAbort = (): void => {
          clearTimeout(t);
          reject(new Error('aborted'));
        };
        const t = setTimeout(() => {
          signal.removeEventListener('abort', onAbort);
          resolve();
        }, this.options.latencyMs ?? 0);
        signal.addEventListener('abort', onAbort, { once: true });
      });
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
