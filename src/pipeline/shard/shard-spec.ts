/** `--shard K/N`: which share of the work one of N runners takes, read from the command line. */
import { UserError } from '../run/exit-codes.js';

/**
 * One runner's place among `count` runners. `index` counts from 1 inside the code (the share arithmetic reads
 * plainer so); the command line's K counts from 0, as a scheduler's job index does, so K = index - 1.
 */
export interface Shard {
  readonly index: number;
  readonly count: number;
}

const SPEC = /^\s*(\d{1,6})\s*\/\s*(\d{1,6})\s*$/;

/**
 * Parses `K/N` (0 ≤ K < N, as Kubernetes' JOB_COMPLETION_INDEX counts). A bad spec is a usage error, said before anything is read or sent: every runner of a
 * scheduler gets the same command line but its own K, so a slip here would silently leave a share undone.
 */
export function parseShard(value: string): Shard {
  const m = SPEC.exec(value);
  const fix = 'give K/N with 0 <= K < N, e.g. --shard 1/4 for the second of four runners (K counts from 0)';
  if (m === null) throw new UserError(`--shard '${value}' is not of the form K/N; ${fix}`);
  const k = Number(m[1]);
  const count = Number(m[2]);
  if (count < 1) throw new UserError(`--shard ${value}: there must be at least one runner (N >= 1); ${fix}`);
  if (k >= count) throw new UserError(`--shard ${value}: runner ${k} is not one of 0..${count - 1}; ${fix}`);
  return { index: k + 1, count };
}

/** The shard as written back, for messages and summaries. */
export function shardText(shard: Shard): string {
  return `${shard.index - 1}/${shard.count}`;
}

/**
 * Whether the part at `index` (0-based, in reading order) of `parts` is the shard's: runner K takes a run of
 * whole parts, [⌈(K-1)·parts/N⌉, ⌈K·parts/N⌉), so that the runners' outputs, put end to end in K order, are the
 * parts in reading order, as one runner writes them. With fewer parts than runners, the last runners have none.
 */
export function partsShare(parts: number, shard: Shard): (index: number) => boolean {
  const from = Math.ceil(((shard.index - 1) * parts) / shard.count);
  const to = Math.ceil((shard.index * parts) / shard.count);
  return (index) => index >= from && index < to;
}
