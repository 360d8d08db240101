import { describe, expect, it } from 'vitest';
import { NetworkError } from '../../src/client/errors.js';
import { ClientError, ClockSkewError, ServiceError, UnauthorizedError } from '../../src/protocol/index.js';
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
  describe('before any batch was answered, a failure no retry can clear stops the run', () => {
    const target = 'http://127.0.0.1:9/v3/identity/map';
    const wrongSecret = () =>
      new ClientError(
        400,
        'client_error',
        'Invalid body: Check encryption key (ClientSecret). See https://unifiedid.com',
      );
    const causes: { name: string; error: () => Error; kind: 'failed' | 'auth-refused'; says: RegExp }[] = [
      {
        name: 'connection refused',
        error: () => new NetworkError(target, 'refused', 'ECONNREFUSED'),
        kind: 'failed',
        says: /connection refused.*check/,
      },
      {
        name: 'host name not found',
        error: () => new NetworkError(target, 'dns', 'ENOTFOUND'),
        kind: 'failed',
        says: /host name not found.*check/,
      },
      {
        name: 'TLS',
        error: () => new NetworkError(target, 'tls', 'ERR_SSL_WRONG_VERSION_NUMBER'),
        kind: 'failed',
        says: /TLS.*check/,
      },
      {
        name: "a proxy's 407",
        error: () => new NetworkError(target, 'proxy-auth', 'HTTP 407'),
        kind: 'failed',
        says: /proxy.*user:password/,
      },
      {
        name: 'a wrong client secret',
        error: wrongSecret,
        kind: 'auth-refused',
        says: /client secret does not match the API key/,
      },
      { name: '403', error: () => new ServiceError(403, 'forbidden', undefined), kind: 'failed', says: /403/ },
    ];
    for (const c of causes) {
      it(`${c.name}: stops (${c.kind}) with the cause and a fix`, () => {
        const run = lifecycle();
        run.haltOnBatchError(c.error());
        const outcome = run.outcome();
        expect(outcome.kind).toBe(c.kind);
        expect(run.abort.signal.aborted).toBe(true);
        expect(outcome.kind === 'completed' || outcome.kind === 'interrupted' ? '' : outcome.error.message).toMatch(
          c.says,
        );
      });
    }

    it('once a batch was answered, the same failures leave the run going (their rows end in error)', () => {
      for (const c of causes) {
        const run = lifecycle();
        run.noteBatchAnswered();
        run.haltOnBatchError(c.error());
        expect(run.stopped).toBe(false);
      }
    });

    it('failures that may clear by themselves leave the run going', () => {
      for (const error of [
        new NetworkError(target, 'reset', 'ECONNRESET'),
        new NetworkError(target, 'timeout', 'UND_ERR_HEADERS_TIMEOUT'),
        new NetworkError(target, 'dns', 'EAI_AGAIN'),
        new ServiceError(503, 'server_error', undefined),
        new ClientError(400, 'client_error', 'Invalid identifier'),
      ]) {
        const run = lifecycle();
        run.haltOnBatchError(error);
        expect(run.stopped).toBe(false);
      }
    });
  });
});
