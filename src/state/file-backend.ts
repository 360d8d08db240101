/** A state file behind the StateBackend interface: a StateStore for a run, a StateReader for what reads it whole. */
import type { StateBackend } from './backend.js';
import { StateReadonlyError } from './errors.js';
import { openState, openStateReader, type StateReader } from './open.js';
import type { StateStore } from './store.js';
import type { OpenStateOptions } from './types.js';

const DAY_S = 86_400;
// later than any r
const END_OF_TIME_S = Date.UTC(9999, 11, 31) / 1000;
const WALK_PAGE = 1_000;

/**
 * Opens the state file at `path`. With `anyEnvironment` only a reader is opened (a file of any environment, read
 * as it is); otherwise the file is opened as a run opens it (openState), and read through the same store.
 */
export async function openFileState(path: string, options: OpenStateOptions): Promise<StateBackend> {
  const reading = options.anyEnvironment === true;
  const opened: StateStore | null = reading ? null : openState(path, options);
  const reader: StateReader = opened ?? openStateReader(path);
  const store = (what: string): StateStore => {
    if (opened === null) throw new StateReadonlyError(path, what);
    return opened;
  };
  return {
    kind: 'file',
    where: path,
    readonly: reading || options.readonly === true,
    meta: async () => reader.meta(),
    getMeta: async (key) => reader.getMeta(key),
    setMeta: async (key, value) => store('write its meta').setMeta(key, value),
    lookupStored: async (type, hashes) => store('look entries up').lookupStored(type, hashes),
    commitBatch: async (updates, nowS, journal) => store('commit a batch').commitBatch(updates, nowS, journal),
    pendingChanges: async (kind, afterId, limit) => store('read its changes').pendingChanges(kind, afterId, limit),
    lastPendingChangeId: async (kind) => store('read its changes').lastPendingChangeId(kind),
    ackChanges: async (kind, upToId) => store('acknowledge delivered changes').ackChanges(kind, upToId),
    countDue: async (nowS) => store('count due entries').countDue(nowS),
    dueByDay: async (nowS, days) => store('count due entries').dueByDay(nowS, days),
    selectDue: async (nowS, after, limit) => store('read due entries').selectDue(nowS, after, limit),
    // the due lists are in day order: the first entry after afterS of a walk from its day is on the earliest day
    firstDueDay: async (afterS) => {
      const due = store('read due entries');
      for (let page = due.selectDue(END_OF_TIME_S, { r: afterS, id: 0 }, WALK_PAGE); page.length > 0; ) {
        const next = page.find((e) => e.r !== null && e.r > afterS);
        if (next !== undefined) return Math.floor((next.r as number) / DAY_S) * DAY_S;
        page = due.selectDue(END_OF_TIME_S, page[page.length - 1], WALK_PAGE);
      }
      return null;
    },
    selectForOptoutCheck: async (limit, after, upTo) =>
      store('read entries to check').selectForOptoutCheck(limit, after, upTo),
    sweepCursor: async () => store('read the sweep cursor').sweepCursor(),
    countWithRawUid: async () => store('count entries').countWithRawUid(),
    recordOptoutChecks: async (ids, nowS, cursor) =>
      store('record opt-out checks').recordOptoutChecks(ids, nowS, cursor),
    tombstoneByRawUid: async (optedOut, nowS, within, journal) =>
      store('tombstone opted-out entries').tombstoneByRawUid(optedOut, nowS, within, journal),
    startRun: async (command, argsJson, nowS) => store('record a run').startRun(command, argsJson, nowS),
    finishRun: async (id, summaryJson, exitCode, nowS) =>
      store('record a run').finishRun(id, summaryJson, exitCode, nowS),
    lastRun: async () => reader.lastRun(),
    // one writing run at a time on a file, whatever it does
    lock: async () => store('lock').lock(),
    entries: () => reader.entries(),
    damaged: () => reader.damaged(),
    tally: async (bounds) => reader.tally(bounds),
    pendingChangeCounts: async () => reader.pendingChangeCounts(),
    readRecords: async (after, limit) => {
      const rows = store('read its records').records(after, limit);
      return { records: rows.map((row) => row.record), last: rows.at(-1)?.id ?? after };
    },
    writeRecords: async (records) => {
      const nowS = Math.floor(Date.now() / 1000);
      store('write records').commitBatch(
        records.map(({ type, hash, ...values }) => ({ type, hash, outcome: { kind: 'record', ...values } })),
        nowS,
      );
    },
    // idempotent: the store closes once
    close: async () => reader.close(),
  };
}
