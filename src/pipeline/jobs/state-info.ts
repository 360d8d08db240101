/** `state info`: what a state file holds, by status and by due date, and how big it is. */
import { META_KEYS, openStateReader, stateFileSizes } from '../../state/index.js';

const DAY_S = 86_400;
/** The windows of the due-date counts, in days after now. */
const DUE_WINDOWS = [7, 30, 365] as const;

export interface StateInfoReport {
  path: string;
  size_bytes: { file: number; wal: number; shm: number };
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

export function readStateInfo(path: string, nowS: number): StateInfoReport {
  const file = openStateReader(path);
  try {
    // r at most now, at most each window's end, and at all: one pass over the entries
    const {
      byStatus: status,
      withoutR,
      atMost,
    } = file.tally([nowS, ...DUE_WINDOWS.map((days) => nowS + days * DAY_S), Number.MAX_SAFE_INTEGER]);
    const now = atMost[0];
    const within = DUE_WINDOWS.map((_, i) => atMost[i + 1] - now);
    const withR = atMost[atMost.length - 1];
    const run = file.lastRun();
    const version = Number(file.meta(META_KEYS.schemaVersion));
    return {
      path,
      size_bytes: stateFileSizes(path),
      schema_version: Number.isInteger(version) ? version : null,
      api: file.meta(META_KEYS.api),
      environment: file.meta(META_KEYS.envFingerprint),
      created_at: file.meta(META_KEYS.createdAt),
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
      pending_changes: file.pendingChanges(),
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
  } finally {
    file.close();
  }
}
