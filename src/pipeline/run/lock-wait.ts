/** --wait for a lock on the state: a database share's tried again with growing pauses, as a state file's is. */
import type { StateBackend } from '../../state/backend.js';
import { StateLockedError, type StateStore } from '../../state/index.js';

// the first pause, and the longest: short enough to start soon after the holder ends, long enough not to spin
const FIRST_PAUSE_MS = 50;
const LONGEST_PAUSE_MS = 1_000;

/**
 * Calls `take` until it does not throw StateLockedError, pausing between tries, for up to `waitMs`; then rethrows
 * the last refusal, so that a lock still held when the time is up fails as it does without a wait. Any other
 * error is thrown at once.
 */
export async function takeLockWaiting(take: () => void | Promise<void>, waitMs: number): Promise<void> {
  const deadline = Date.now() + Math.max(0, waitMs);
  let pause = FIRST_PAUSE_MS;
  for (;;) {
    try {
      await take();
      return;
    } catch (err) {
      if (!(err instanceof StateLockedError) || Date.now() >= deadline) throw err;
    }
    await new Promise((resolve) => setTimeout(resolve, Math.min(pause, Math.max(1, deadline - Date.now()))));
    pause = Math.min(pause * 2, LONGEST_PAUSE_MS);
  }
}

/**
 * The lock a sweep of the state (remap-due, optout-check --state) holds while it writes: a state file's one lock;
 * on a database, the lock of this runner's share, so that two runs never sweep the same entries while other shares'
 * runs go side by side. --wait (`waitS`) waits for another run's lock in both.
 */
export async function lockForSweep(
  state: Pick<StateStore, 'waitForLock'> | Pick<StateBackend, 'kind' | 'lock'>,
  command: string,
  /** --shard K/N: runner `index` of `count`. */
  shard: { index: number; count: number } | undefined,
  waitS: number | undefined,
): Promise<void> {
  const waitMs = (waitS ?? 0) * 1000;
  if (!('kind' in state)) return state.waitForLock(waitMs);
  const share = shard !== undefined && shard.count > 1 ? { shard: { index: shard.index, count: shard.count } } : {};
  await takeLockWaiting(() => state.lock({ kind: 'sweep', command, ...share }), waitMs);
}
