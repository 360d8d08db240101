import { parentPort, Worker } from 'node:worker_threads';
import { noteTaskDone } from './bench-report.js';

/** A task message, pool to worker. */
interface TaskMessage<In> {
  id: number;
  input: In;
}

/** What a task threw, as plain data: its class name, message, and own fields (an InputError's line, say). */
export interface ThrownInWorker {
  name: string;
  message: string;
  fields: Record<string, unknown>;
}

/** A worker's answer to one task. */
type AnswerMessage<Out> = { id: number; ok: true; output: Out } | { id: number; ok: false; error: ThrownInWorker };

/** A worker thread failed: its task threw, or the thread itself died. */
export class WorkerTaskError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WorkerTaskError';
  }
}

interface Pending<Out> {
  resolve(output: Out): void;
  reject(error: Error): void;
}

interface Slot<Out> {
  worker: Worker;
  pending: Map<number, Pending<Out>>;
}

export interface WorkerPoolOptions {
  /** The worker script (compiled JS); it calls serveTasks(). */
  script: URL;
  /** Threads, at least 1. */
  size: number;
  /** Given to every worker as its workerData (plain data). */
  workerData?: unknown;
  /** What the work is, for error messages ("output encoding"). */
  purpose: string;
  /** Turns what a task threw back into an error of this thread (default: a WorkerTaskError with its message). */
  revive?: (thrown: ThrownInWorker) => Error | undefined;
  /** Per-thread V8 limits (a bigger young generation cuts GC work for allocation-heavy tasks). */
  resourceLimits?: { maxYoungGenerationSizeMb?: number; maxOldGenerationSizeMb?: number };
}

/**
 * A fixed set of worker threads that run tasks of one kind. run() resolves with the task's own answer, so a
 * caller that awaits its tasks in submission order gets results in that order whichever thread ran them.
 * A task goes to the thread with the fewest tasks waiting.
 */
export class WorkerPool<In, Out> {
  private readonly slots: Slot<Out>[] = [];
  private nextId = 1;
  private closed = false;
  private failure: Error | undefined;

  constructor(private readonly options: WorkerPoolOptions) {
    const size = Math.max(1, Math.floor(options.size));
    for (let i = 0; i < size; i++) this.slots.push(this.startWorker());
  }

  get size(): number {
    return this.slots.length;
  }

  run(input: In, transfer: readonly ArrayBuffer[] = []): Promise<Out> {
    return this.runOn(this.leastBusy(), input, transfer);
  }

  /** The thread with the fewest tasks waiting. */
  leastBusy(): number {
    let best = 0;
    for (let i = 1; i < this.slots.length; i++)
      if (this.slots[i].pending.size < this.slots[best].pending.size) best = i;
    return best;
  }

  /** Runs a task on one given thread (one that holds state from an earlier task). */
  runOn(thread: number, input: In, transfer: readonly ArrayBuffer[] = []): Promise<Out> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    if (this.closed)
      return Promise.reject(new WorkerTaskError(`${this.options.purpose}: the worker threads were already stopped`));
    const slot = this.slots[thread];
    const id = this.nextId++;
    return new Promise<Out>((resolve, reject) => {
      if (slot.pending.size === 0) slot.worker.ref();
      slot.pending.set(id, { resolve, reject });
      const message: TaskMessage<In> = { id, input };
      slot.worker.postMessage(message, transfer as ArrayBuffer[]);
    });
  }

  /** Stops every thread; tasks not yet answered are rejected. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const stopped = new WorkerTaskError(`${this.options.purpose}: stopped before the task finished`);
    for (const slot of this.slots) this.rejectAll(slot, stopped);
    await Promise.all(this.slots.map((slot) => slot.worker.terminate()));
  }

  private startWorker(): Slot<Out> {
    const worker = new Worker(this.options.script, {
      workerData: this.options.workerData,
      ...(this.options.resourceLimits !== undefined ? { resourceLimits: this.options.resourceLimits } : {}),
    });
    const slot: Slot<Out> = { worker, pending: new Map() };
    worker.on('message', (message: AnswerMessage<Out>) => {
      const pending = slot.pending.get(message.id);
      if (pending === undefined) return;
      slot.pending.delete(message.id);
      if (slot.pending.size === 0) slot.worker.unref();
      if (message.ok) pending.resolve(message.output);
      else
        pending.reject(
          this.options.revive?.(message.error) ??
            new WorkerTaskError(`${this.options.purpose} failed in a worker thread: ${message.error.message}`),
        );
    });
    worker.on('error', (err: Error) =>
      this.fail(new WorkerTaskError(`${this.options.purpose}: a worker thread crashed: ${err.message}`)),
    );
    worker.on('exit', (code) => {
      if (!this.closed)
        this.fail(new WorkerTaskError(`${this.options.purpose}: a worker thread exited unexpectedly (code ${code})`));
    });
    // an idle thread must not keep the process alive (a caller that forgets close() would hang); a busy one must
    worker.unref();
    return slot;
  }

  /** A dead thread fails the pool: later tasks would be answered out of order or never. */
  private fail(error: Error): void {
    this.failure ??= error;
    for (const s of this.slots) this.rejectAll(s, this.failure);
  }

  private rejectAll(slot: Slot<Out>, error: Error): void {
    const pending = [...slot.pending.values()];
    slot.pending.clear();
    slot.worker.unref();
    for (const p of pending) p.reject(error);
  }
}

/**
 * The worker side: answers each task with handler's result, or with the message of what it threw. A handler may
 * answer later (a promise): tasks then run interleaved, and each is answered when it settles.
 */
export function serveTasks<In, Out>(handler: (input: In) => TaskResult<Out> | Promise<TaskResult<Out>>): void {
  const port = parentPort;
  if (port === null) throw new Error('serveTasks: not running in a worker thread');
  const fail = (id: number, err: unknown) => port.postMessage({ id, ok: false, error: thrownAsData(err) });
  const answer = (id: number, result: TaskResult<Out>) => {
    const message: AnswerMessage<Out> = { id, ok: true, output: result.output };
    port.postMessage(message, result.transfer ?? []);
    noteTaskDone();
  };
  port.on('message', (message: TaskMessage<In>) => {
    try {
      const result = handler(message.input);
      if (result instanceof Promise)
        result.then(
          (r) => answer(message.id, r),
          (err: unknown) => fail(message.id, err),
        );
      else answer(message.id, result);
    } catch (err) {
      fail(message.id, err);
    }
  });
}

/** A task's answer, and the buffers to hand over (transfer) with it. */
export interface TaskResult<Out> {
  output: Out;
  transfer?: ArrayBuffer[];
}

function thrownAsData(err: unknown): ThrownInWorker {
  if (!(err instanceof Error)) return { name: 'Error', message: String(err), fields: {} };
  const fields: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(err)) {
    if (value === undefined || value === null || ['string', 'number', 'boolean'].includes(typeof value))
      fields[key] = value;
  }
  return { name: err.name, message: err.message, fields };
}
