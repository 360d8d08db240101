/** How a run that sends batches stops and ends: the one lifecycle the map, remap and opt-out engines share. */
import { setMaxListeners } from 'node:events';
import { ClockSkewError, UnauthorizedError } from '../../protocol/index.js';
import { CredentialsRefusedError, unreachableService } from './unreachable-service.js';
import { windDownInFlight } from './wind-down.js';

/** How a run ended. A failure is one that every further batch would hit too, or --fail-fast's first. */
export type RunOutcome =
  | { kind: 'completed' }
  | { kind: 'interrupted' }
  /** 401, or a client secret the service cannot decrypt with: the credentials were refused; nothing more was sent. */
  | { kind: 'auth-refused'; error: Error }
  /**
   * --fail-fast and a batch failed, or a failure that every further batch would hit too (clock skew, state, and
   * before any batch was answered: the service unreachable, see unreachable-service.ts).
   */
  | { kind: 'failed'; error: Error };

/** What was thrown, as an Error (a library may throw anything). */
export function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}

export interface RunLifecycleOptions {
  /** Listeners expected on the run's abort signal (one per request in flight); 0 for no limit. */
  maxListeners: number;
  /** What requests in flight get to finish and commit after an interrupt (default 10 s). */
  graceMs?: number | undefined;
}

/** Distinct batch failure reasons a run keeps for its summary line. */
const MAX_BATCH_ERRORS = 5;

/**
 * The state of one run: whether and how it stopped, the requests in flight, and the signal they listen on.
 * A fatal answer (401, clock skew, a state file that cannot be written, --fail-fast) aborts what is in flight at
 * once; an interrupt (the caller's signal) stops new work and lets what is in flight finish for `graceMs`.
 */
export class RunLifecycle {
  /** Every request of the run listens on its signal. */
  readonly abort = new AbortController();
  /** The first few distinct reasons batches failed for. */
  readonly batchErrors: string[] = [];
  private stop: RunOutcome | null = null;
  /** Whether any batch of the run got an answer: from then on the service is known to be reachable. */
  private answered = false;
  private inFlightCount = 0;
  private wake: (() => void) | null = null;
  private readonly onHaltHooks: (() => void)[] = [];

  constructor(private readonly options: RunLifecycleOptions) {
    setMaxListeners(options.maxListeners, this.abort.signal);
  }

  /** True once the run is stopping: nothing new is to be sent. */
  get stopped(): boolean {
    return this.stop !== null;
  }

  /** Requests sent and not yet settled. */
  get outstanding(): number {
    return this.inFlightCount;
  }

  /** How the run ends: the reason it stopped, or completed. */
  outcome(): RunOutcome {
    return this.stop ?? { kind: 'completed' };
  }

  /** Called once, when the run stops (for example to give up a pending read). */
  onHalt(hook: () => void): void {
    this.onHaltHooks.push(hook);
  }

  /** Stops the run; the first reason wins. */
  halt(outcome: RunOutcome): void {
    if (this.stop !== null) return;
    this.stop = outcome;
    if (outcome.kind !== 'interrupted') this.abort.abort();
    for (const hook of this.onHaltHooks.splice(0)) hook();
    this.wakeUp();
  }

  /** Interrupts the run when `signal` aborts; returns the function that stops listening. */
  listenForInterrupt(signal: AbortSignal | undefined): () => void {
    if (signal === undefined) return () => undefined;
    const onAbort = (): void => this.halt({ kind: 'interrupted' });
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    return () => signal.removeEventListener('abort', onAbort);
  }

  /** A batch failed because the run aborted it, not because of its answer. */
  cutShort(): boolean {
    return this.stop !== null && this.abort.signal.aborted;
  }

  /** A batch got the service's answer: failures from now on end in error rows, not in stopping the run. */
  noteBatchAnswered(): void {
    this.answered = true;
  }

  /**
   * Stops the run when a batch's failure would end every further batch too (or at any failure with failFast).
   * Before any batch was answered, that includes a service that cannot be reached at all: the run then ends with
   * the cause instead of an output of rows that all say `error`.
   */
  haltOnBatchError(error: Error, failFast = false): void {
    const unreachable = this.answered ? undefined : unreachableService(error);
    if (error instanceof UnauthorizedError) this.halt({ kind: 'auth-refused', error });
    else if (error instanceof ClockSkewError) this.halt({ kind: 'failed', error });
    else if (unreachable instanceof CredentialsRefusedError) this.halt({ kind: 'auth-refused', error: unreachable });
    else if (unreachable !== undefined) this.halt({ kind: 'failed', error: unreachable });
    else if (failFast) this.halt({ kind: 'failed', error });
  }

  /** Keeps a batch's failure reason for the summary (the first few distinct ones). */
  noteBatchError(reason: string): void {
    if (this.batchErrors.length < MAX_BATCH_ERRORS && !this.batchErrors.includes(reason)) this.batchErrors.push(reason);
  }

  /** Counts a request as in flight until it settles, then wakes whoever waits for one to settle. */
  async inFlight(send: () => Promise<void>): Promise<void> {
    this.inFlightCount++;
    try {
      await send();
    } finally {
      this.inFlightCount--;
      this.wakeUp();
    }
  }

  /** Resolves when a request settles or the run stops. */
  settled(): Promise<void> {
    return new Promise((resolve) => {
      this.wake = resolve;
    });
  }

  /** After a stop: requests in flight get the grace period (after an interrupt) or none, then are aborted. */
  windDown(): Promise<void> {
    return windDownInFlight({
      outstanding: () => this.inFlightCount,
      settled: () => this.settled(),
      abort: this.abort,
      graceMs: this.stop?.kind === 'interrupted' ? (this.options.graceMs ?? 10_000) : 0,
    });
  }

  private wakeUp(): void {
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }
}
