/** --wait for a database share's lock: tried again with growing pauses, as a state file's waitForLock does. */
import { StateLockedError } from '../../state/index.js';

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
