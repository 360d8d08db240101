import { describe, expect, it } from 'vitest';
import { ClockSkewError, ServiceError, UnauthorizedError } from '../../src/protocol/index.js';
import { asError, RunLifecycle } from '../../src/pipeline/run/run-lifecycle.js';

const lifecycle = (graceMs?: number) => new RunLifecycle({ maxListeners: 0, graceMs });

/** A request that settles when told to, or at once when the run's signal aborts. */
function request(run: RunLifecycle) {
  let settle = (): void => undefined;
  const done = run.inFlight(
    () =>
      new Promise<void>((resolve) => {
        settle = resolve;
        run.abort.signal.addEventListener('abort', () => resolve(), { once: true });
      }),
  );
  return { settle: () => settle(), done };
}

describe('RunLifecycle', () => {
  it('completes when nothing stopped it', () => {
    const run = lifecycle();
    expect(run.stopped).toBe(false);
    expect(run.outcome()).toEqual({ kind: 'completed' });
  });

  it('keeps the first reason to stop, and aborts requests for a fatal one only', () => {
    const interrupted = lifecycle();
    interrupted.halt({ kind: 'interrupted' });
    interrupted.halt({ kind: 'failed', error: new Error('later') });
    expect(interrupted.outcome()).toEqual({ kind: 'interrupted' });
    expect(interrupted.abort.signal.aborted).toBe(false);

    const failed = lifecycle();
    const error = new Error('disk full');
    failed.halt({ kind: 'failed', error });
    expect(failed.outcome()).toEqual({ kind: 'failed', error });
    expect(failed.abort.signal.aborted).toBe(true);
    expect(failed.cutShort()).toBe(true);
  });

  it('runs the halt hooks once', () => {
    const run = lifecycle();
    let calls = 0;
    run.onHalt(() => calls++);
    run.halt({ kind: 'interrupted' });
    run.halt({ kind: 'interrupted' });
    expect(calls).toBe(1);
  });

  it('is interrupted by the caller signal, and stops listening when told', () => {
    const stop = new AbortController();
    const run = lifecycle();
    const unlisten = run.listenForInterrupt(stop.signal);
    stop.abort();
    expect(run.outcome()).toEqual({ kind: 'interrupted' });
    unlisten();

    const later = new AbortController();
    const other = lifecycle();
    other.listenForInterrupt(later.signal)();
    later.abort();
    expect(other.stopped).toBe(false);
  });

  it('halts on 401 and clock skew, and on any batch error only with failFast', () => {
    const auth = lifecycle();
    auth.haltOnBatchError(new UnauthorizedError(401, 'unauthorized', undefined));
    expect(auth.outcome().kind).toBe('auth-refused');

    const skew = lifecycle();
    skew.haltOnBatchError(new ClockSkewError(400, 'client_error', 'Invalid timestamp'));
    expect(skew.outcome().kind).toBe('failed');

    const plain = lifecycle();
    plain.haltOnBatchError(new ServiceError(500, 'unknown', undefined));
    expect(plain.stopped).toBe(false);
    plain.haltOnBatchError(new ServiceError(500, 'unknown', undefined), true);
    expect(plain.outcome().kind).toBe('failed');
  });

  it('keeps the first five distinct batch errors', () => {
    const run = lifecycle();
    for (const reason of ['a', 'b', 'a', 'c', 'd', 'e', 'f']) run.noteBatchError(reason);
    expect(run.batchErrors).toEqual(['a', 'b', 'c', 'd', 'e']);
  });

  it('counts requests in flight and wakes a waiter when one settles', async () => {
    const run = lifecycle();
    const first = request(run);
    const second = request(run);
    expect(run.outstanding).toBe(2);
    const woken = run.settled();
    first.settle();
    await woken;
    await first.done;
    expect(run.outstanding).toBe(1);
    second.settle();
    await second.done;
    expect(run.outstanding).toBe(0);
  });

  it('winds down: after an interrupt requests finish in the grace time; after a failure they are aborted', async () => {
    const interrupted = lifecycle(5_000);
    const slow = request(interrupted);
    interrupted.halt({ kind: 'interrupted' });
    const windDown = interrupted.windDown();
    slow.settle();
    await windDown;
    expect(interrupted.abort.signal.aborted).toBe(false);
    expect(interrupted.outstanding).toBe(0);

    const failed = lifecycle(5_000);
    request(failed);
    failed.halt({ kind: 'failed', error: new Error('x') });
    await failed.windDown();
    expect(failed.outstanding).toBe(0);
  });

  it('turns anything thrown into an Error', () => {
    const error = new Error('e');
    expect(asError(error)).toBe(error);
    expect(asError('text').message).toBe('text');
  });
});
