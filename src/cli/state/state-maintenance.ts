// `uid2-batch state checkpoint|vacuum FILE`: fold the WAL into the file, or compact the file, under the run lock.
import type Database from 'better-sqlite3';
import { sqliteDriver } from '../../state/sqlite-driver.js';
import { openState } from '../../state/index.js';
import { META_KEYS } from '../../state/schema.js';
import type { StateStore } from '../../state/types.js';
import { EXIT, UserError } from '../shared/exit-codes.js';
import { openStateForReading, stateFileSizes } from './state-file.js';

/** How often a waiting command tries the lock again. */
const LOCK_RETRY_MS = 250;

/** Takes the state's run lock, trying again until `waitS` seconds have passed while another run holds it. */
export async function lockWithin(
  store: Pick<StateStore, 'lock'>,
  waitS: number,
  now: () => number = Date.now,
): Promise<void> {
  const deadline = now() + waitS * 1000;
  for (;;) {
    try {
      store.lock();
      return;
    } catch (err) {
      if (!(err instanceof Error) || err.name !== 'StateLockedError' || now() >= deadline) throw err;
    }
    await new Promise((resolve) => setTimeout(resolve, LOCK_RETRY_MS));
  }
}

export interface MaintenanceResult {
  before: { file: number; wal: number };
  after: { file: number; wal: number };
}

/**
 * Runs `work` on a writing connection while this process holds the state's run lock, so that no map or
 * remap-due writes meanwhile. The file is opened as a run opens it (of the environment it records).
 */
async function underRunLock(
  path: string,
  waitS: number,
  work: (db: Database.Database) => void,
): Promise<MaintenanceResult> {
  const reader = openStateForReading(path);
  const env = reader.meta(META_KEYS.envFingerprint);
  reader.close();
  if (env === null) throw new UserError(`state file ${path} records no environment; it is damaged`);
  const store = openState(path, { envFingerprint: env, create: false });
  try {
    await lockWithin(store, waitS);
    const before = stateFileSizes(path);
    const db = new (sqliteDriver())(path, { fileMustExist: true, timeout: 5_000 });
    try {
      work(db);
    } finally {
      db.close();
    }
    const after = stateFileSizes(path);
    return { before: { file: before.file, wal: before.wal }, after: { file: after.file, wal: after.wal } };
  } finally {
    store.close();
  }
}

/** Writes the WAL into the file and truncates it: afterwards a plain copy of the file is a complete backup. */
export function checkpointState(path: string, waitS: number): Promise<MaintenanceResult> {
  return underRunLock(path, waitS, (db) => {
    const [result] = db.pragma('wal_checkpoint(TRUNCATE)') as { busy: number; log: number; checkpointed: number }[];
    if (result !== undefined && result.busy !== 0) {
      throw new UserError(
        `state file ${path} is being read by another process: the checkpoint could not finish; run it again`,
        EXIT.failed,
      );
    }
  });
}

/** Rebuilds the file without its free pages (after many tombstones or a migration), then checkpoints. */
export function vacuumState(path: string, waitS: number): Promise<MaintenanceResult> {
  return underRunLock(path, waitS, (db) => {
    db.exec('VACUUM');
    db.pragma('wal_checkpoint(TRUNCATE)');
  });
}
