/** `state info`: what a state holds, by status and by due date, and how big its file is. */
import type { StateRun } from '../../state/backend.js';
import { type EntryTally, META_KEYS, openStateReader, stateFileSizes } from '../../state/index.js';
import { isPostgresState, openStateBackend } from '../../state/open-backend.js';

const DAY_S = 86_400;
/** The windows of the due-date counts, in days after now. */
const DUE_WINDOWS = [7, 30, 365] as const;

export interface StateInfoReport {
  /** The file's path, or the database URL without its password. */
  path: string;
  /** Null for a state in a database. */
  size_bytes: { file: number; wal: number; shm: number } | null;
  schema_version: number | null;
  api: string | null;
  environment: string | null;
  created_at: string | null;
  entries: number;
  status: { mapped: number; optout: number; invalid: number };
  now_s: number;
  /** Entries with a refresh time: due now (r <= now), within each window, and later. */
  due: { now: number; within_7_days: number; within_30_days: number; within_365_days: number; later: number };
  /** Entries without a refresh time (tombstones, invalids, v2 entries). */
  no_refresh_time: number;
  pending_changes: Record<string, number>;
  /** The last run: its wall-clock start, and the time it was told to use (`--now`; its start when not given). */
  last_run: {
    command: string;
    started_at: string;
    now: string;
    finished_at: string | null;
    exit_code: number | null;
  } | null;
}

/** A time as `state info` writes it: ISO 8601 in UTC, whole seconds. */
export const isoSeconds = (s: number): string => new Date(s * 1000).toISOString().replace('.000Z', 'Z');

/** What a report is made of, read from a state of any kind. */
interface InfoValues {
  where: string;
  sizes: StateInfoReport['size_bytes'];
  meta: (key: string) => string | null;
  tally: EntryTally;
  pending: Record<string, number>;
  run: StateRun | null;
}

/** The tally's bounds: r at most now, at most each window's end, and at all (one pass over the entries). */
const boundsOf = (nowS: number): number[] => [
  nowS,
  ...DUE_WINDOWS.map((days) => nowS + days * DAY_S),
  Number.MAX_SAFE_INTEGER,
];

/** `state info` of a state file, read as it is (of any environment). */
export function readStateInfo(path: string, nowS: number): StateInfoReport {
  const file = openStateReader(path);
  try {
    const tally = file.tally(boundsOf(nowS));
    const values = { where: path, sizes: stateFileSizes(path), tally, pending: file.pendingChangeCounts() };
    return infoReport({ ...values, meta: (key) => file.getMeta(key), run: file.lastRun() }, nowS);
  } finally {
    file.close();
  }
}

/**
 * `state info` of the state `spec` names, a file or a database (of any environment). A database has no file
 * sizes: `size_bytes` is null for it.
 */
export async function readStateInfoOf(spec: string, nowS: number): Promise<StateInfoReport> {
  if (!isPostgresState(spec)) return readStateInfo(spec, nowS);
  const state = await openStateBackend(spec, { envFingerprint: '', anyEnvironment: true, readonly: true });
  try {
    const tally = await state.tally(boundsOf(nowS));
    const meta = new Map<string, string | null>();
    for (const key of [META_KEYS.schemaVersion, META_KEYS.api, META_KEYS.envFingerprint, META_KEYS.createdAt])
      meta.set(key, await state.getMeta(key));
    const pending = await state.pendingChangeCounts();
    const run = await state.lastRun();
    return infoReport(
      { where: state.where, sizes: null, meta: (key) => meta.get(key) ?? null, tally, pending, run },
      nowS,
    );
  } finally {
    await state.close();
  }
}

function infoReport(v: InfoValues, nowS: number): StateInfoReport {
  const { byStatus: status, withoutR, atMost } = v.tally;
  const now = atMost[0];
  const within = DUE_WINDOWS.map((_, i) => atMost[i + 1] - now);
  const withR = atMost[atMost.length - 1];
  const run = v.run;
  const version = Number(v.meta(META_KEYS.schemaVersion));
  return {
    path: v.where,
    size_bytes: v.sizes,
    schema_version: Number.isInteger(version) ? version : null,
    api: v.meta(META_KEYS.api),
    environment: v.meta(META_KEYS.envFingerprint),
    created_at: v.meta(META_KEYS.createdAt),
    entries: status.mapped + status.optout + status.invalid,
    status,
    now_s: nowS,
    due: {
      now,
      within_7_days: within[0],
      within_30_days: within[1],
      within_365_days: within[2],
      later: withR - now - within[2],
    },
    no_refresh_time: withoutR,
    pending_changes: v.pending,
    last_run:
      run === null
        ? null
        : {
            command: run.command,
            started_at: isoSeconds(run.startedAtS),
            now: isoSeconds(run.nowS),
            finished_at: run.finishedAtS === null ? null : isoSeconds(run.finishedAtS),
            exit_code: run.exitCode,
          },
  };
}
