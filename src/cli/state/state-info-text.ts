// How `state info` prints its report: sizes for people, one line per subject.
import { isoSeconds as iso, type StateInfoReport } from '../../pipeline/jobs/state-info.js';
import { formatCount } from '../../pipeline/run/summary.js';

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

export function formatStateInfo(i: StateInfoReport): string {
  const pending = Object.entries(i.pending_changes).filter(([, n]) => n > 0);
  const lines = [
    i.size_bytes === null
      ? `state ${i.path}`
      : `state file ${i.path}: ${formatBytes(i.size_bytes.file)}${i.size_bytes.wal > 0 ? ` (+ ${formatBytes(i.size_bytes.wal)} of WAL not yet checkpointed)` : ''}`,
    `  schema ${i.schema_version ?? '?'}, api ${i.api ?? '?'}, created ${i.created_at ?? '?'}, environment ${i.environment ?? '?'}`,
    `  ${formatCount(i.entries)} entries: ${formatCount(i.status.mapped)} mapped, ${formatCount(i.status.optout)} optout, ${formatCount(i.status.invalid)} invalid`,
    `  due at ${iso(i.now_s)}: ${formatCount(i.due.now)} now; ${formatCount(i.due.within_7_days)} within 7 days, ${formatCount(i.due.within_30_days)} within 30, ` +
      `${formatCount(i.due.within_365_days)} within 365, ${formatCount(i.due.later)} later; ${formatCount(i.no_refresh_time)} without a refresh time`,
    `  pending changes: ${pending.length === 0 ? 'none' : pending.map(([kind, n]) => `${formatCount(n)} ${kind}`).join(', ')}`,
    `  last run: ${i.last_run === null ? 'none' : `${i.last_run.command} at ${i.last_run.started_at} (now ${i.last_run.now}), ${i.last_run.finished_at === null ? 'not finished' : `exit ${i.last_run.exit_code ?? '?'}`}`}`,
  ];
  return `${lines.join('\n')}\n`;
}
