import type { StateStore } from '../../state/index.js';
import { RemapEngine, type RemapBatchFn, type RemapOptions, type RemapResult } from '../remap/remap-engine.js';

/**
 * The v2 -> v3 migration of a state file (docs/wire-protocol.md §5.7): every mapped v2 entry is re-mapped through
 * /v3/identity/map, which gives it `r` (and `p`) and drops its salt bucket; once none is left the file is marked
 * api v3. It runs on the remap engine (same batching, concurrency, retries, one commit per batch), so it resumes
 * by running again: a committed entry is v3 and is not sent again.
 */

/** Meta key: when the migration started (ISO 8601). While it is set and the file is still v2, v2 runs are refused. */
export const MIGRATION_STARTED = 'migration_started';
/** Meta key: when the migration finished (ISO 8601). */
export const MIGRATION_FINISHED = 'migration_finished';

export type MigrateState = Pick<
  StateStore,
  | 'selectDue'
  | 'selectDueV2'
  | 'commitBatch'
  | 'markBucketEntriesDue'
  | 'bucketEntries'
  | 'countDueV2'
  | 'getMeta'
  | 'setMeta'
  | 'meta'
>;

export interface MigrateOptions extends Omit<RemapOptions, 'state' | 'mapBatch' | 'selectPage'> {
  state: MigrateState;
  /** A v3 map request (client.mapV3). */
  mapBatch: RemapBatchFn;
}

export interface MigrateResult extends RemapResult {
  /** v2 entries before this run. */
  v2Before: number;
  /** v2 entries still left after it. */
  v2Left: number;
  /** True when this run moved the last entry and marked the file api v3. */
  finished: boolean;
}

/** Whether a migration of this v2 file has started (and v2 map and remap-due runs must wait for it). */
export function migrationInProgress(state: Pick<StateStore, 'getMeta' | 'meta'>): boolean {
  return state.meta().api === 'v2' && state.getMeta(MIGRATION_STARTED) !== null;
}

/**
 * One migration run. Every run first marks due the v2 entries that are not yet (only v2 ones: what an earlier
 * run moved to v3 is left alone), then walks the due entries by id. The file becomes v3 only when a completed
 * run leaves no v2 entry behind.
 */
export async function migrateToV3(options: MigrateOptions): Promise<MigrateResult> {
  const { state } = options;
  const v2Before = state.bucketEntries().count;
  if (state.getMeta(MIGRATION_STARTED) === null)
    state.setMeta(MIGRATION_STARTED, new Date(options.nowS * 1000).toISOString());
  state.markBucketEntriesDue();
  const engine = new RemapEngine({
    ...options,
    state,
    selectPage: (after, limit) => state.selectDueV2(after?.id ?? null, limit),
  });
  const result = await engine.run();
  const v2Left = state.bucketEntries().count;
  let finished = false;
  if (result.outcome.kind === 'completed' && v2Left === 0 && state.countDueV2() === 0) {
    state.setMeta(MIGRATION_FINISHED, new Date(options.nowS * 1000).toISOString());
    // last: a crash before it leaves a v2 file with nothing to migrate, and the next run finishes here
    state.setMeta('api', 'v3');
    finished = true;
  }
  return { ...result, v2Before, v2Left, finished };
}
