/** The state file as a map run uses it: opened, checked against the run's API, locked, and its runs row. */
import { openState, type StateStore } from '../../state/index.js';
import type { EngineState, ThreadedEngineState } from '../map/map-engine.js';
import { StateThread } from '../map/state-thread.js';
import { UserError } from '../run/exit-codes.js';
import { migrationInProgress } from '../v2/migration.js';

/** The state file as `map` uses it: the engine's lookups and commits, and one row in the runs table. */
export interface MapStateFile {
  /** A writing run's lookups and commits go to a thread of their own (when its compiled script is there). */
  engineState: EngineState | ThreadedEngineState;
  /** Records the run in the runs table (not in a dry run, which opens the file read-only: then 0). */
  startRun(command: string, argsJson: string, nowS: number): number;
  finishRun(runId: number, summaryJson: string, exitCode: number, nowS: number): void;
  /** After every commit given to the state's thread. */
  close(): Promise<void>;
}

export interface MapStateOptions {
  envFingerprint: string;
  /** A dry run reads the state and writes nothing; the file must exist. */
  readonly: boolean;
  /** The API of the run (default v3): a new file records it, an existing file must have been made with it. */
  api?: 'v3' | 'v2';
}

/**
 * Opens the state file for `map`: created when missing (not in a dry run), refused when made for another
 * environment or by `map --api v2`, and locked so two runs never write it at once.
 */
export function openMapState(path: string, options: MapStateOptions): MapStateFile {
  const api = options.api ?? 'v3';
  const store: StateStore = openState(path, {
    envFingerprint: options.envFingerprint,
    api,
    readonly: options.readonly,
  });
  try {
    const fileApi = store.meta().api;
    if (fileApi !== api && api === 'v3') {
      throw new UserError(
        `--state ${path} holds v2 (salt bucket) mappings: map (v3) cannot add to it; convert it with uid2-batch migrate --state ${path}, ` +
          'or keep mapping with v2 (--api v2) until then',
      );
    }
    if (fileApi !== api) {
      throw new UserError(
        `--state ${path} holds v3 mappings (with refresh times): map --api v2 cannot add to it; drop --api v2 (v3 is the current API), or give --api v2 its own state file`,
      );
    }
    if (api === 'v2' && migrationInProgress(store)) {
      throw new UserError(
        `--state ${path} is being migrated to v3: finish with uid2-batch migrate --state ${path}, then map without --api v2`,
      );
    }
    if (!options.readonly) store.lock();
  } catch (err) {
    store.close();
    throw err;
  }
  // SQLite's work (a few microseconds per entry looked up or written) then runs beside the main thread's
  const thread =
    !options.readonly && StateThread.available()
      ? new StateThread({ path, envFingerprint: options.envFingerprint, api })
      : undefined;
  return {
    engineState: thread ?? store,
    startRun(command, argsJson, nowS) {
      return options.readonly ? 0 : store.startRun(command, argsJson, nowS);
    },
    finishRun(runId, summaryJson, exitCode, nowS) {
      if (!options.readonly) store.finishRun(runId, summaryJson, exitCode, nowS);
    },
    async close() {
      try {
        await thread?.close();
      } finally {
        store.close();
      }
    },
  };
}
