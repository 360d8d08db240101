import type { EngineState } from '../pipeline/engine.js';
import { openState, type StateStore } from '../state/index.js';
import { UserError } from './exit-codes.js';

/** The state file as `map` uses it: the engine's lookups and commits, and one row in the runs table. */
export interface MapStateFile {
  engineState: EngineState;
  /** Records the run (not in a dry run, which opens the file read-only). */
  beginRun(argsJson: string, nowS: number): void;
  endRun(summaryJson: string, exitCode: number, nowS: number): void;
  close(): void;
}

export interface MapStateOptions {
  envFingerprint: string;
  /** A dry run reads the state and writes nothing; the file must exist. */
  readonly: boolean;
}

/**
 * Opens the state file for `map`: created when missing (not in a dry run), refused when made for another
 * environment or by `map --api v2`, and locked so two runs never write it at once.
 */
export function openMapState(path: string, options: MapStateOptions): MapStateFile {
  const store: StateStore = openState(path, { envFingerprint: options.envFingerprint, api: 'v3', readonly: options.readonly });
  let runId: number | undefined;
  try {
    if (store.meta().api !== 'v3') {
      throw new UserError(`--state ${path} holds v2 (salt bucket) mappings; give map (v3) its own state file, or run uid2-batch migrate first`);
    }
    if (!options.readonly) store.lock();
  } catch (err) {
    store.close();
    throw err;
  }
  return {
    engineState: store,
    beginRun(argsJson, nowS) {
      if (!options.readonly) runId = store.startRun('map', argsJson, nowS);
    },
    endRun(summaryJson, exitCode, nowS) {
      if (runId !== undefined) store.finishRun(runId, summaryJson, exitCode, nowS);
    },
    close() {
      store.close();
    },
  };
}
