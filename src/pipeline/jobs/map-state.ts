/** The state as a map run uses it: opened, checked against the run's API, locked, and its runs row. */
import { openState, type StateStore } from '../../state/index.js';
import { describeState, isPostgresState, openStateBackend } from '../../state/open-backend.js';
import type { EngineState, ThreadedEngineState } from '../map/map-engine.js';
import { StateThread } from '../map/state-thread.js';
import { UserError } from '../run/exit-codes.js';
import { migrationInProgress } from '../v2/migration.js';

/** The state as `map` uses it: the engine's lookups and commits, and one row in the runs table. */
export interface MapStateFile {
  /**
   * A writing run's lookups and commits of a file go to a thread of their own (when its compiled script is there);
   * a database's are its own promises.
   */
  engineState: EngineState | ThreadedEngineState;
  /** Records the run in the runs table (not in a dry run, which opens the state read-only: then 0). */
  startRun(command: string, argsJson: string, nowS: number): number | Promise<number>;
  finishRun(runId: number, summaryJson: string, exitCode: number, nowS: number): void | Promise<void>;
  /** After every commit given to the state's thread. */
  close(): Promise<void>;
}

/** The state of a map run, settled once: where it is, how it is used, and what it must hold. */
export interface StateSpec {
  /** A file path or a postgres:// URL. */
  readonly location: string;
  /** write: created when missing, locked, the run recorded; read (a dry run): read only, it must exist. */
  readonly mode: 'write' | 'read';
  readonly envFingerprint: string;
  /** The API of the run: a new state records it, an existing one must have been made with it. */
  readonly api: 'v3' | 'v2';
}

/** Opens the state a map run's spec names: a file or a database URL (openMapDatabase). */
export function openMapState(spec: StateSpec): MapStateFile | Promise<MapStateFile> {
  return isPostgresState(spec.location) ? openMapDatabase(spec) : openMapFile(spec);
}

/**
 * The state file for `map`: created when missing (not in a dry run), refused when made for another environment or
 * by `map --api v2`, and locked so two runs never write it at once.
 */
function openMapFile(spec: StateSpec): MapStateFile {
  const { location: path, envFingerprint, api } = spec;
  const readonly = spec.mode === 'read';
  const store: StateStore = openState(path, { envFingerprint, api, readonly });
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
    if (!readonly) store.lock();
  } catch (err) {
    store.close();
    throw err;
  }
  // SQLite's work (a few microseconds per entry looked up or written) then runs beside the main thread's
  const thread = !readonly && StateThread.available() ? new StateThread({ path, envFingerprint, api }) : undefined;
  return {
    engineState: thread ?? store,
    startRun(command, argsJson, nowS) {
      return readonly ? 0 : store.startRun(command, argsJson, nowS);
    },
    finishRun(runId, summaryJson, exitCode, nowS) {
      if (!readonly) store.finishRun(runId, summaryJson, exitCode, nowS);
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

/**
 * A database for `map`: its schema made on first use, refused when it holds another environment's entries, and
 * locked as a map run (map runs write side by side, each commit an upsert). The v2 API keeps its state in a file.
 */
async function openMapDatabase(spec: StateSpec): Promise<MapStateFile> {
  if (spec.api === 'v2') {
    throw new UserError(
      `map --api v2 keeps its state in a file, not in a database (--state ${describeState(spec.location)}); drop --api v2 (v3 is the current API), or give --state a file path`,
    );
  }
  const readonly = spec.mode === 'read';
  const state = await openStateBackend(spec.location, {
    envFingerprint: spec.envFingerprint,
    api: 'v3',
    readonly,
    create: !readonly,
  });
  try {
    if ((await state.meta()).api !== 'v3') {
      throw new UserError(
        `--state ${state.where} holds v2 (salt bucket) mappings: map (v3) cannot add to it; give --state another database schema`,
      );
    }
    if (!readonly) await state.lock({ kind: 'map' });
  } catch (err) {
    await state.close();
    throw err;
  }
  return {
    engineState: {
      threaded: true,
      lookupStored: (type, hashes) => state.lookupStored(type, hashes),
      commitBatch: (updates, nowS) => state.commitBatch(updates, nowS),
    },
    startRun: (command, argsJson, nowS) => (readonly ? 0 : state.startRun(command, argsJson, nowS)),
    finishRun: async (runId, summaryJson, exitCode, nowS) => {
      if (!readonly) await state.finishRun(runId, summaryJson, exitCode, nowS);
    },
    close: () => state.close(),
  };
}
