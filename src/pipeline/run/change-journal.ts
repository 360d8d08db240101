import type { ChangeKind, PendingChange, StateStore } from '../../state/types.js';

/**
 * The pending changes of the state file as a run's output sees them. Change rows are journaled with the commit
 * of their batch and acknowledged only once an output holding them is committed; a run that was killed or whose
 * output was dropped leaves them pending, and the next run writes them first. Delivery is at least once: a row
 * may appear in two outputs (killed after the rename, before the acknowledgement), never in none.
 */
export type ChangeJournal = Pick<StateStore, 'pendingChanges'>;

/** Rows read per page: a large backlog never sits in memory whole. */
const REPLAY_PAGE = 5_000;

/**
 * Hands every pending row of `kind` to `deliver`, page by page in id order (awaited: a sink's backpressure);
 * returns how many there were.
 */
export async function replayPendingChanges(
  journal: ChangeJournal,
  kind: ChangeKind,
  deliver: (rows: PendingChange[]) => void | Promise<void>,
): Promise<number> {
  let after = 0;
  let total = 0;
  for (;;) {
    const page = journal.pendingChanges(kind, after, REPLAY_PAGE);
    if (page.length === 0) return total;
    total += page.length;
    after = page[page.length - 1].id;
    await deliver(page);
    if (page.length < REPLAY_PAGE) return total;
  }
}

/** A journaled row back as the object it was written from; `check` says whether it has the expected shape. */
export function parseJournalRow<T>(change: PendingChange, check: (value: unknown) => value is T, what: string): T {
  let value: unknown;
  try {
    value = JSON.parse(change.row);
  } catch {
    value = undefined;
  }
  if (!check(value)) {
    throw new Error(
      `the state file holds a damaged pending ${what} row (id ${change.id}); it cannot be written to the output`,
    );
  }
  return value;
}
