// `uid2-batch state info FILE`: what a state file holds, by status and by due date, and how big it is.
import { META_KEYS } from '../../state/schema.js';
import { formatCount } from '../../pipeline/run/summary.js';
import { openStateForReading, stateFileSizes } from './state-file.js';

const DAY_S = 86_400;
/** The windows of the due-date counts, in days after now. */
const DUE_WINDOWS = [7, 30, 365] as const;

export interface StateInfo {
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

const iso = (s: number): string => new Date(s * 1000).toISOString().replace('.000Z', 'Z');

export function readStateInfo(path: string, nowS: number): StateInfo {
  const file = openStateForReading(path);
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
              started_at: iso(run.startedAtS),
              now: iso(run.nowS),
              finished_at: run.finishedAtS === null ? null : iso(run.finishedAtS),
              exit_code: run.exitCode,
            },
    };
  } finally {
    file.close();
  }
}

/** "1.2 MB", "512 B": sizes for people. */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KB', 'MB', 'GB', 'TB'];
  let v = n / 1024;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${v.toFixed(1)} ${units[u]}`;
}

export function formatStateInfo(i: StateInfo): string {
  const pending = Object.entries(i.pending_changes).filter(([, n]) => n > 0);
  const lines = [
    `state file ${i.path}: ${formatBytes(i.size_bytes.file)}${i.size_bytes.wal > 0 ? ` (+ ${formatBytes(i.size_bytes.wal)} of WAL not yet checkpointed)` : ''}`,
    `  schema ${i.schema_version ?? '?'}, api ${i.api ?? '?'}, created ${i.created_at ?? '?'}, environment ${i.environment ?? '?'}`,
    `  ${formatCount(i.entries)} entries: ${formatCount(i.status.mapped)} mapped, ${formatCount(i.status.optout)} optout, ${formatCount(i.status.invalid)} invalid`,
    `  due at ${iso(i.now_s)}: ${formatCount(i.due.now)} now; ${formatCount(i.due.within_7_days)} within 7 days, ${formatCount(i.due.within_30_days)} within 30, ` +
      `${formatCount(i.due.within_365_days)} within 365, ${formatCount(i.due.later)} later; ${formatCount(i.no_refresh_time)} without a refresh time`,
    `  pending changes: ${pending.length === 0 ? 'none' : pending.map(([kind, n]) => `${formatCount(n)} ${kind}`).join(', ')}`,
    `  last run: ${i.last_run === null ? 'none' : `${i.last_run.command} at ${i.last_run.started_at} (now ${i.last_run.now}), ${i.last_run.finished_at === null ? 'not finished' : `exit ${i.last_run.exit_code ?? '?'}`}`}`,
  ];
  return `${lines.join('\n')}\n`;
}
