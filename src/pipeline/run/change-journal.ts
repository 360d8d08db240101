import { stat } from 'node:fs/promises';
import type { ChangeKind, PendingChange } from '../../state/types.js';
import type { RunOutput } from '../io/output/commit-together.js';
import type { PreparedOutput, SealedOutput, TableSink } from '../io/table.js';

/**
 * The pending changes of the state file as a run's output sees them. Change rows are journaled with the commit
 * of their batch and stay pending until an output holding them is in place. Only a completed run writes its
 * output: a run that does not complete writes none, and its rows stay pending for the next completed run, which
 * writes them first. Delivery is exactly once for a file output: a file that was renamed into place is never
 * written again by a later run, and rows that no file in place holds are written by the next run. Before the rename, the state records which file is about to hold them
 * (its device, inode, size and modification time); after it, the rows leave the journal. A run killed between
 * the two leaves that record, and the next run looks at the target: the same file there means the rename
 * happened (the rows leave), anything else that it did not (the rows are written again). On stdout there is no
 * rename to look at: a run killed after its last row and before the acknowledgement writes them again.
 */
export interface ChangeJournal {
  pendingChanges(channel: ChangeChannel, afterId?: number, limit?: number): PendingChange[] | Promise<PendingChange[]>;
  getMeta(key: string): string | null | Promise<string | null>;
  setMeta(key: string, value: string): void | Promise<void>;
  ackChanges(channel: ChangeChannel, upToId: number): number | Promise<number>;
}

/**
 * Whose journal rows these are, as the state's `kind` column holds them: the kind alone for an unsharded run,
 * `kind K/N` for runner K of N (K from 0, as --shard takes it). A run replays, delivers and acknowledges its own
 * channel only, so runners at once never deliver each other's changes, and a failed runner's rows wait for the
 * re-run of the same share.
 */
export type ChangeChannel = ChangeKind | `${ChangeKind} ${number}/${number}`;

/** The channel of a run of `kind`; `shard` as shard-spec.ts reads it (index from 1). */
export function changeChannel(kind: ChangeKind, shard?: { index: number; count: number }): ChangeChannel {
  return shard === undefined || shard.count === 1 ? kind : `${kind} ${shard.index - 1}/${shard.count}`;
}

const CHANNEL = /^(remap|optout)( (0|[1-9]\d*)\/([1-9]\d*))?$/;

/** Whether `text`, read from a state's journal, names a channel (anything else is left where it is). */
export function isChangeChannel(text: string): text is ChangeChannel {
  const m = CHANNEL.exec(text);
  return m !== null && (m[2] === undefined || Number(m[3]) < Number(m[4]));
}

/** Rows read per page: a large backlog never sits in memory whole. */
const REPLAY_PAGE = 5_000;

/**
 * The meta key of the file about to hold the pending rows of `channel` while its rename is in doubt: written just
 * before it, cleared just after the rows leave the journal; empty otherwise.
 */
export function deliveryKey(channel: ChangeChannel): string {
  return `delivery_${channel}`;
}

/** What the state records of a file about to hold the pending rows up to `upTo`. */
interface DeliveryRecord extends SealedOutput {
  stage: 'sealed';
  upTo: number;
}

function deliveryRecord(text: string | null): DeliveryRecord | null {
  if (text === null || text === '') return null;
  let v: Record<string, unknown>;
  try {
    v = JSON.parse(text) as Record<string, unknown>;
  } catch {
    return null;
  }
  if (typeof v !== 'object' || v === null) return null;
  const numbers = ['upTo', 'dev', 'ino', 'size', 'mtimeMs'].every(
    (k) => typeof v[k] === 'number' && Number.isFinite(v[k]),
  );
  if (!numbers || typeof v.target !== 'string' || v.stage !== 'sealed') return null;
  return v as unknown as DeliveryRecord;
}

/** Whether the file at the record's target is the very file recorded (the rename keeps it whole). */
async function inPlace(record: SealedOutput): Promise<boolean> {
  const found = await stat(record.target).catch(() => null);
  return (
    found !== null &&
    found.dev === record.dev &&
    found.ino === record.ino &&
    found.size === record.size &&
    found.mtimeMs === record.mtimeMs
  );
}

/**
 * Settles a delivery that a killed run left in doubt: when its file is in place (the same file at the target),
 * its rows leave the journal; otherwise they stay, for this run to write. Returns what it found.
 */
export async function settleDeliveryInDoubt(
  journal: ChangeJournal,
  channel: ChangeChannel,
): Promise<'delivered' | 'not delivered' | null> {
  const text = await journal.getMeta(deliveryKey(channel));
  if (text === null || text === '') return null;
  const record = deliveryRecord(text);
  // a damaged record says nothing: the rows stay pending (written again rather than never)
  const delivered = record !== null && (await inPlace(record));
  if (delivered) await journal.ackChanges(channel, record.upTo);
  await journal.setMeta(deliveryKey(channel), '');
  return delivered ? 'delivered' : 'not delivered';
}

/** What a run's output holds of the journal. */
export interface DeliveredRows {
  channel: ChangeChannel;
  /** The last pending id it holds; null when none. */
  upTo: number | null;
}

/**
 * `sink`, the output of a completed run that holds the pending rows up to `rows.upTo`, as one of the run's outputs
 * (commit-together.ts): committed alone or with the others, its rows are delivered exactly when it is in place. The record is written
 * just before its own rename, after every output of the run is complete, so a run whose other output could not be
 * finished leaves the rows pending. A failure to record the delivery is said through `say` and not thrown: the
 * output holds the rows either way, and at worst the next run writes them again.
 */
export function deliveringOutput(
  sink: TableSink,
  journal: Pick<ChangeJournal, 'setMeta' | 'ackChanges'>,
  rows: DeliveredRows,
  say: (line: string) => void,
): RunOutput {
  const output: RunOutput = {
    commit: () => deliverWith((sealed) => sink.commit(sealed), journal, rows, say),
    abort: () => sink.abort(),
  };
  const prepare = sink.prepareCommit?.bind(sink);
  // stdout has nothing to prepare: it is committed (ended) in commitTogether's first step, and acknowledged then
  if (prepare !== undefined)
    output.prepareCommit = async (): Promise<PreparedOutput> => {
      const prepared = await prepare();
      return {
        publish: () => deliverWith((sealed) => prepared.publish(sealed), journal, rows, say),
        discard: () => prepared.discard(),
      };
    };
  return output;
}

/** Commits `sink` alone, delivering the rows it holds (see deliveringOutput). */
export async function commitDelivering(
  sink: TableSink,
  journal: Pick<ChangeJournal, 'setMeta' | 'ackChanges'>,
  rows: DeliveredRows,
  say: (line: string) => void,
): Promise<void> {
  await deliveringOutput(sink, journal, rows, say).commit();
}

/**
 * Renames an output into place through `rename` (which calls its argument just before the rename), recording the
 * file first and acknowledging the rows it holds after.
 */
async function deliverWith(
  rename: (sealed?: (file: SealedOutput) => void | Promise<void>) => Promise<void>,
  journal: Pick<ChangeJournal, 'setMeta' | 'ackChanges'>,
  rows: DeliveredRows,
  say: (line: string) => void,
): Promise<void> {
  const { channel, upTo } = rows;
  if (upTo === null) {
    await rename();
    return;
  }
  const unrecorded = (err: unknown): void =>
    say(
      `the state file could not record that the changes were written (${err instanceof Error ? err.message : String(err)}); the next run writes them again`,
    );
  const seal: { file: SealedOutput | null } = { file: null };
  await rename(async (file) => {
    try {
      const record: DeliveryRecord = { ...file, stage: 'sealed', upTo };
      await journal.setMeta(deliveryKey(channel), JSON.stringify(record));
      seal.file = file;
    } catch (err) {
      unrecorded(err);
    }
  });
  try {
    await journal.ackChanges(channel, upTo);
    if (seal.file !== null) await journal.setMeta(deliveryKey(channel), '');
  } catch (err) {
    // a record in doubt stays: the next run finds the file in place and acknowledges the rows then
    if (seal.file === null) unrecorded(err);
  }
}

/**
 * Hands every pending row of `channel` to `deliver`, page by page in id order (awaited: a sink's backpressure);
 * returns how many there were. A delivery an earlier run of the channel left in doubt is settled first.
 */
export async function replayPendingChanges(
  journal: ChangeJournal,
  channel: ChangeChannel,
  deliver: (rows: PendingChange[]) => void | Promise<void>,
): Promise<number> {
  await settleDeliveryInDoubt(journal, channel);
  let after = 0;
  let total = 0;
  for (;;) {
    const page = await journal.pendingChanges(channel, after, REPLAY_PAGE);
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
