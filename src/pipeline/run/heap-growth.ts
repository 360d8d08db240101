/** Keeps the CLI process's V8 heap close to what it holds live during a batch run, to bound its peak memory. */
import { setFlagsFromString } from 'node:v8';

/**
 * How far the old generation may grow past what the last full collection kept, in percent.
 *
 * Left to itself, V8 lets the next limit reach up to four times the live size on a machine with plenty of memory,
 * and a batch run is the case that reaches it: a small, steady live set (the rows waiting in the reassembly
 * window, the identifiers in flight) and a fast stream of short-lived answers, many of which outlive a young
 * collection. The heap then swings between the live size and four times it, and the peak RSS follows the top of
 * the swing. A fixed step of 100% keeps the top at about twice the live size, for more frequent full
 * collections: a smaller step lowers the peak a little more but costs CPU, most of it in V8's concurrent marking,
 * which competes with the row threads for the cores. To weigh another value, run `map` with node's own
 * `--heap-growing-percent=N` (which this leaves alone) and without it, in turns, and compare rows/s and peak RSS
 * (`/usr/bin/time -f %M`).
 */
export const HEAP_GROWING_PERCENT = 100;

const FLAG = '--heap-growing-percent';

let applied = false;

/**
 * Sets the growth step for this process (and its worker threads), once, before a run allocates much. Only the
 * CLI calls it: a program that uses the library keeps its own V8 settings. A value given on node's own command
 * line wins. There is no other way to bound the main thread's heap growth without starting a second process:
 * resourceLimits exist only for worker threads, and the semi-space and old-space sizes are fixed at start-up.
 */
export function boundHeapGrowth(execArgv: readonly string[] = process.execArgv): void {
  if (applied) return;
  applied = true;
  if (execArgv.some((arg) => arg === FLAG || arg.startsWith(`${FLAG}=`) || arg.startsWith('--heap_growing_percent')))
    return;
  setFlagsFromString(`${FLAG}=${HEAP_GROWING_PERCENT}`);
}
