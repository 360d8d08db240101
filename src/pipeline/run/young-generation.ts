/** Stops the CLI process's young generation (V8's new space) on the main thread from growing past a set size. */
import { PerformanceObserver } from 'node:perf_hooks';
import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';
import type { Worker } from 'node:worker_threads';

/**
 * Size of the main thread's new space (both of its halves) at which it stops growing, in MB.
 *
 * V8 starts the new space small and doubles it whenever much of what it holds survives a young collection, up to
 * a maximum fixed at start-up. A batch run grows it to that maximum: the answers waiting in the reassembly window
 * survive a collection or two before they are written. The whole new space counts in the peak RSS, and a smaller
 * one mostly moves the same objects to the old generation a little sooner, where the bounded growth step
 * (heap-growth.ts) collects them. To weigh another size, run `map` with node's own `--max-semi-space-size=N`
 * (half of this size, which turns this off) and without it, in turns, and compare rows/s and peak RSS
 * (bench/formats.mjs).
 */
export const NEW_SPACE_MB = 8;

/** node command-line flags that size the young generation: with one of them, nothing is done. */
const OWN_FLAGS = /^--(max|min)[-_]semi[-_]space[-_]size|^--semi[-_]space[-_]growth[-_]factor|^--max[-_]young/;

const STOP = '--semi-space-growth-factor=1';
/** V8's own growth factor, which it also puts back whenever an isolate is created. */
const GROW = '--semi-space-growth-factor=2';
/**
 * A worker thread's isolate starts with half-spaces of this size, in MB (V8 takes at most the maximum that its
 * resourceLimits, or V8's own default, give it): once the growth factor is 1, a worker thread could no longer
 * grow its young generation to the size chosen for it.
 */
const WORKER_START = '--min-semi-space-size=16';
/** V8's default: an isolate starts with its smallest half-spaces. */
const NO_WORKER_START = '--min-semi-space-size=0';

let bound: { observer: PerformanceObserver; onWorker: (worker: Worker) => void } | undefined;
let stopped = false;

function newSpaceBytes(): number {
  return getHeapSpaceStatistics().find((space) => space.space_name === 'new_space')?.space_size ?? 0;
}

/**
 * From the first young collection that finds the new space at NEW_SPACE_MB, tells V8 not to grow it (a growth
 * factor of 1). The maximum itself is read only when an isolate is created, so it cannot be lowered at run time.
 * Called before the CLI's modules are loaded: loading them grows the new space as much as a run would.
 *
 * The growth factor is process-wide and V8 puts it back to its default when a worker thread's isolate is
 * created, so it is set again once each worker thread is running, and after every collection that finds the
 * new space at its size. A worker thread started after that starts with its young generation at the maximum its
 * resourceLimits (or V8's default) give it, as it cannot grow.
 */
export function boundYoungGeneration(execArgv: readonly string[] = process.execArgv): void {
  if (bound !== undefined || execArgv.some((arg) => OWN_FLAGS.test(arg))) return;
  const limit = NEW_SPACE_MB * 1024 * 1024;
  const stop = (): void => {
    if (bound === undefined) return;
    if (!stopped && newSpaceBytes() < limit) return;
    if (!stopped) setFlagsFromString(WORKER_START);
    stopped = true;
    setFlagsFromString(STOP);
  };
  const observer = new PerformanceObserver(stop);
  observer.observe({ entryTypes: ['gc'] });
  const onWorker = (worker: Worker): void => {
    worker.once('online', stop);
  };
  process.on('worker', onWorker);
  bound = { observer, onWorker };
}

/** Lets the new space grow as V8 would again: for a command that is not a batch run, such as `serve`. */
export function releaseYoungGeneration(): void {
  if (bound === undefined) return;
  bound.observer.disconnect();
  process.removeListener('worker', bound.onWorker);
  bound = undefined;
  if (stopped) {
    setFlagsFromString(GROW);
    setFlagsFromString(NO_WORKER_START);
  }
  stopped = false;
}
