import { describe, expect, it } from 'vitest';
import { windDownInFlight } from '../../src/pipeline/run/wind-down.js';

/** Requests in flight that settle when told to, or when aborted if they honour the signal. */
function inFlight(n: number, honoursAbort: boolean) {
  let outstanding = n;
  let wake: (() => void) | undefined;
  const abort = new AbortController();
  const settleOne = () => {
    outstanding--;
    wake?.();
  };
  if (honoursAbort)
    abort.signal.addEventListener('abort', () => {
      while (outstanding > 0) settleOne();
    });
  return {
    abort,
    settleOne,
    outstanding: () => outstanding,
    settled: () => new Promise<void>((resolve) => (wake = resolve)),
  };
}

describe('windDownInFlight', () => {
  it('returns at once with nothing in flight, and never aborts', async () => {
    const f = inFlight(0, true);
    await windDownInFlight({ ...f, graceMs: 10_000 });
    expect(f.abort.signal.aborted).toBe(false);
  });

  it('waits for requests that finish within the grace time, without aborting them', async () => {
    const f = inFlight(2, true);
    setTimeout(f.settleOne, 20);
    setTimeout(f.settleOne, 40);
    await windDownInFlight({ ...f, graceMs: 5_000 });
    expect(f.outstanding()).toBe(0);
    expect(f.abort.signal.aborted).toBe(false);
  });

  it('aborts what is still in flight after the grace time', async () => {
    const f = inFlight(3, true);
    const started = Date.now();
    await windDownInFlight({ ...f, graceMs: 50 });
    expect(f.abort.signal.aborted).toBe(true);
    expect(f.outstanding()).toBe(0);
    expect(Date.now() - started).toBeLessThan(1_500);
  });

  it('does not wait forever for a request that ignores the abort', async () => {
    const f = inFlight(1, false);
    await windDownInFlight({ ...f, graceMs: 0 });
    expect(f.abort.signal.aborted).toBe(true);
    expect(f.outstanding()).toBe(1);
  });
});
