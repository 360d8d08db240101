/** Keeps the CLI process's V8 heap close to what it holds live during a batch run, to bound its peak memory. */
import { setFlagsFromString } from 'node:v8';

/**
 * How far the old generation may grow past what the last full collection kept, in percent.
 *
 * Left to itself, V8 lets the next limit reach up to four times the live size on a machine with plenty of memory,
 * and a batch run is the case that reaches it: a small, steady live set (the rows waiting in the reassembly
 * window, the identifiers in flight) and a fast stream of short-lived answers, many of which outlive a young
 * collection. The heap then swings between the live size and four times it, and the peak RSS follows the top of
 * the swing. A fixed step of 200% keeps the top at about three times the live size. Each full collection marks the
 * whole live set, most of it on V8's helper threads, which compete with the row threads for the cores: a step of
 * 100% collected twice as often for a peak a little lower, and cost more CPU per row than it saved in memory.
 * To weigh another value, run `map` with node's own `--heap-growing-percent=N` (which this leaves alone) and
 * without it, in turns, and compare the CPU per row and the peak RSS that `npm run bench` prints.
 */
export const HEAP_GROWING_PERCENT = 200;

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
