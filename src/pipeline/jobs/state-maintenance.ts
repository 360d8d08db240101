/** `state checkpoint | vacuum`: fold the WAL into a state file, or compact it, under the run lock. */
import {
  META_KEYS,
  openState,
  openStateReader,
  StateFormatError,
  type StateStore,
  stateFileSizes,
} from '../../state/index.js';
import { refuseDatabaseState } from './state-where.js';

export interface MaintenanceResult {
  before: { file: number; wal: number };
  after: { file: number; wal: number };
}

/**
 * Runs `work` on the store while this process holds the state's run lock (waiting up to `waitS` seconds for a run
 * that holds it), so that no map or remap-due writes meanwhile. The file is opened as a run opens it, of the
 * environment it records.
 */
async function underRunLock(
  path: string,
  waitS: number,
  work: (store: StateStore) => void,
  what: string,
): Promise<MaintenanceResult> {
  refuseDatabaseState(path, `state ${what}`, 'a database keeps its own storage in order');
  const reader = openStateReader(path);
  const env = reader.getMeta(META_KEYS.envFingerprint);
  reader.close();
  if (env === null) throw new StateFormatError(`state file ${path} records no environment; it is damaged`, path);
  const store = openState(path, { envFingerprint: env, create: false });
  try {
    await store.waitForLock(waitS * 1000);
    const before = stateFileSizes(path);
    work(store);
    const after = stateFileSizes(path);
    return { before: { file: before.file, wal: before.wal }, after: { file: after.file, wal: after.wal } };
  } finally {
    store.close();
  }
}

/** Writes the WAL into the file and truncates it: afterwards a plain copy of the file is a complete backup. */
export function checkpointState(path: string, waitS: number): Promise<MaintenanceResult> {
  return underRunLock(path, waitS, (store) => store.checkpoint(), 'checkpoint');
}

/** Rebuilds the file without its free pages (after many tombstones or a migration), then checkpoints. */
export function vacuumState(path: string, waitS: number): Promise<MaintenanceResult> {
  return underRunLock(path, waitS, (store) => store.vacuum(), 'vacuum');
}
