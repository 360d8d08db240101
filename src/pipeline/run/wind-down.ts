/**
 * How an engine stops: nothing more is sent, and the requests in flight get `graceMs` to finish and commit
 * before they are aborted; a request that ignores the abort is not waited for more than 2 s longer.
 */
export async function windDownInFlight(inFlight: {
  /** Requests still in flight. */
  outstanding(): number;
  /** Resolves when one of them settles. */
  settled(): Promise<void>;
  abort: AbortController;
  graceMs: number;
}): Promise<void> {
  if (inFlight.outstanding() === 0) return;
  const abortTimer = setTimeout(() => inFlight.abort.abort(), inFlight.graceMs);
  let giveUpTimer: NodeJS.Timeout | undefined;
  const giveUp = new Promise<void>((resolve) => {
    giveUpTimer = setTimeout(resolve, inFlight.graceMs + 2_000);
  });
  const drained = (async () => {
    while (inFlight.outstanding() > 0) await inFlight.settled();
  })();
  await Promise.race([drained, giveUp]);
  clearTimeout(abortTimer);
  clearTimeout(giveUpTimer);
}
