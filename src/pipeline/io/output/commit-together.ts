/** The outputs of one run renamed into place together, and only once every one of them is complete. */
import type { PreparedOutput } from '../table.js';

/** An output that can be committed or dropped: a TableSink, the --bad-rows list, the outputs of --output-dir. */
export interface RunOutput {
  commit(): Promise<void>;
  abort(): Promise<void>;
  prepareCommit?(): Promise<PreparedOutput>;
}

/**
 * Commits `outputs` as one: each is first finished beside its target (flushed, fsynced, closed); only when all are
 * does any replace its target, so a run whose rejects file cannot be finished (a full disk) does not leave its new
 * main output beside an old rejects file. When one cannot be finished, the others are dropped and the error thrown.
 * An output with nothing to rename (stdout) is committed in the first step.
 */
export async function commitTogether(outputs: readonly (RunOutput | undefined)[]): Promise<void> {
  const present = outputs.filter((o): o is RunOutput => o !== undefined);
  const prepared: PreparedOutput[] = [];
  let next = 0;
  try {
    for (; next < present.length; next++) {
      const output = present[next];
      if (output.prepareCommit !== undefined) prepared.push(await output.prepareCommit());
      else await output.commit();
    }
  } catch (err) {
    // the one that failed has cleaned up after itself
    for (const p of prepared) await p.discard();
    for (const output of present.slice(next + 1)) await output.abort().catch(() => undefined);
    throw err;
  }
  let published = 0;
  try {
    for (; published < prepared.length; published++) await prepared[published].publish();
  } catch (err) {
    for (const p of prepared.slice(published + 1)) await p.discard();
    throw err;
  }
}
