/** `state copy SRC DST`: every entry, the meta and the pending changes of one state into another, resumable. */
import { existsSync, realpathSync } from 'node:fs';
import { resolve } from 'node:path';
import type { StateBackend, StateLockScope } from '../../state/backend.js';
import { StateEnvMismatchError } from '../../state/index.js';
import { describeState, isPostgresState, openStateBackend } from '../../state/open-backend.js';
import { DEFAULT_SCHEMA } from '../../state/postgres/url.js';
import { isChangeChannel } from '../run/change-journal.js';
import { UserError } from '../run/exit-codes.js';

/** Entries per page: one readRecords of the source, one writeRecords (one transaction) of the destination. */
export const COPY_PAGE = 5_000;
/** The destination's meta key that says what it is a copy of, and how far the copy went. */
export const COPY_META_KEY = 'copy_of';
/** A file's one writer lock; a database's lock of `state copy`, so that two copies never run at once. */
const COPY_LOCK: StateLockScope = { kind: 'sweep', command: 'state copy' };

export interface StateCopyOptions {
  /** Entries per page (default COPY_PAGE). */
  page?: number;
  /** After each page is committed, with the entries copied so far by this run. */
  onPage?(copied: number): void;
  /** The source's entries, for progress; asked only when given (it reads the whole source). */
  onTotal?(entries: number): void;
}

export interface StateCopyResult {
  source: string;
  destination: string;
  /** Entries copied by this run. */
  entries: number;
  /** Pending change rows copied by this run. */
  changes: number;
  /** This run went on from where a copy that stopped had left it. */
  resumed: boolean;
  /** The destination was a complete copy already: nothing was written. */
  complete: boolean;
}

/** What the destination records of its copy, in its meta: the source, the last id copied, and whether it is done. */
interface CopyMark {
  source: string;
  createdAt: string;
  after: number;
  done: boolean;
}

/**
 * Copies the state `srcSpec` names into the one `dstSpec` names (a file or a database, either way), in pages;
 * holds both writer locks meanwhile. A copy that stopped goes on from its last page; a finished one does nothing.
 * Refuses the same state twice, a destination of another environment, and one that holds entries not copied from
 * this source.
 */
export async function copyState(
  srcSpec: string,
  dstSpec: string,
  options: StateCopyOptions = {},
): Promise<StateCopyResult> {
  const source = describeState(srcSpec);
  const destination = describeState(dstSpec);
  if (sameState(srcSpec, dstSpec)) {
    throw new UserError(
      `state copy: the source and the destination are the same state (${source}); give another destination`,
    );
  }
  const meta = await readSourceMeta(srcSpec);
  if (meta.api === 'v2' && isPostgresState(dstSpec)) {
    throw new UserError(
      `state copy: ${source} holds v2 (salt bucket) mappings, which stay in a file; convert it first with uid2-batch migrate --state ${source}`,
    );
  }
  const src = await openStateBackend(srcSpec, { envFingerprint: meta.envFingerprint, create: false });
  try {
    await src.lock(COPY_LOCK);
    const dst = await openDestination(dstSpec, meta, srcSpec);
    try {
      await dst.lock(COPY_LOCK);
      return await copyInto(src, dst, { source, destination, createdAt: meta.createdAt }, options);
    } finally {
      await dst.close();
    }
  } finally {
    await src.close();
  }
}

async function copyInto(
  src: StateBackend,
  dst: StateBackend,
  names: { source: string; destination: string; createdAt: string },
  options: StateCopyOptions,
): Promise<StateCopyResult> {
  const result = { source: names.source, destination: names.destination, entries: 0, changes: 0 };
  const mark = await startingMark(dst, names);
  if (mark.done) return { ...result, resumed: false, complete: true };
  const resumed = mark.after > 0;
  const save = (): Promise<void> => dst.setMeta(COPY_META_KEY, JSON.stringify(mark));
  await save();
  if (options.onTotal !== undefined) {
    const { byStatus } = await src.tally([]);
    options.onTotal(byStatus.mapped + byStatus.optout + byStatus.invalid);
  }
  const page = Math.max(1, Math.floor(options.page ?? COPY_PAGE));
  for (;;) {
    const { records, last } = await src.readRecords(mark.after, page);
    if (records.length === 0) break;
    // a page written again after a stop replaces the same entries with the same values
    await dst.writeRecords(records);
    mark.after = last;
    await save();
    result.entries += records.length;
    options.onPage?.(result.entries);
  }
  result.changes = await copyChanges(src, dst);
  mark.done = true;
  await save();
  return { ...result, resumed, complete: false };
}

/**
 * The pending change rows of each channel (each kind, and each share that sharded runs journaled), after the
 * entries. The destination's rows of a channel are dropped first: a copy that stopped among them writes them all
 * again, never twice.
 */
async function copyChanges(src: StateBackend, dst: StateBackend): Promise<number> {
  let copied = 0;
  const nowS = Math.floor(Date.now() / 1000);
  const present = [...Object.keys(await src.pendingChangeCounts()), ...Object.keys(await dst.pendingChangeCounts())];
  const channels = [...new Set(['remap', 'optout', ...present.sort()])].filter(isChangeChannel);
  for (const channel of channels) {
    const there = await dst.lastPendingChangeId(channel);
    if (there !== null) await dst.ackChanges(channel, there);
    if ((await src.lastPendingChangeId(channel)) === null) continue;
    const runId = await dst.startRun('state copy', JSON.stringify({ kind: channel }), nowS);
    for (let after = 0; ; ) {
      const rows = await src.pendingChanges(channel, after, COPY_PAGE);
      if (rows.length === 0) break;
      await dst.commitBatch([], nowS, { runId, channel, rows: rows.map((r) => r.row) });
      after = rows[rows.length - 1].id;
      copied += rows.length;
    }
    await dst.finishRun(runId, JSON.stringify({ changes: copied }), 0, nowS);
  }
  return copied;
}

/** Where the copy starts: the destination's mark of an earlier copy of this source, or a new one (it must be empty). */
async function startingMark(
  dst: StateBackend,
  names: { source: string; destination: string; createdAt: string },
): Promise<CopyMark> {
  const text = await dst.getMeta(COPY_META_KEY);
  const earlier = text === null || text === '' ? null : parseMark(text);
  if (earlier !== null && earlier.source === names.source && earlier.createdAt === names.createdAt) return earlier;
  const holds = (await dst.readRecords(0, 1)).records.length > 0;
  if (holds || earlier !== null) {
    throw new UserError(
      `state copy: ${names.destination} already holds entries that are not a copy of ${names.source}; copy into a new file or an empty database schema`,
    );
  }
  return { source: names.source, createdAt: names.createdAt, after: 0, done: false };
}

function parseMark(text: string): CopyMark | null {
  try {
    const v = JSON.parse(text) as Partial<CopyMark>;
    const ok =
      typeof v.source === 'string' &&
      typeof v.createdAt === 'string' &&
      typeof v.after === 'number' &&
      Number.isSafeInteger(v.after) &&
      typeof v.done === 'boolean';
    return ok ? (v as CopyMark) : null;
  } catch {
    return null;
  }
}

/** The source's meta, read as it is (of any environment). */
async function readSourceMeta(spec: string): Promise<{ envFingerprint: string; api: 'v3' | 'v2'; createdAt: string }> {
  const state = await openStateBackend(spec, { envFingerprint: '', anyEnvironment: true, readonly: true });
  try {
    const meta = await state.meta();
    return { envFingerprint: meta.envFingerprint, api: meta.api, createdAt: meta.createdAt };
  } finally {
    await state.close();
  }
}

/** The destination, created with the source's environment, API and creation time, or refused for another one. */
async function openDestination(
  spec: string,
  meta: { envFingerprint: string; api: 'v3' | 'v2'; createdAt: string },
  srcSpec: string,
): Promise<StateBackend> {
  let dst: StateBackend;
  try {
    dst = await openStateBackend(spec, {
      envFingerprint: meta.envFingerprint,
      api: meta.api,
      createdAt: meta.createdAt,
    });
  } catch (err) {
    if (!(err instanceof StateEnvMismatchError)) throw err;
    throw new UserError(
      `state copy: ${describeState(spec)} holds entries of environment ${err.storedFingerprint}, and ${describeState(srcSpec)} is of ${meta.envFingerprint}; a state never mixes environments: copy into a new file or an empty database schema`,
    );
  }
  const api = (await dst.meta()).api;
  if (api !== meta.api) {
    await dst.close();
    throw new UserError(
      `state copy: ${describeState(spec)} holds ${api} mappings and ${describeState(srcSpec)} ${meta.api} ones; copy into a new file or an empty database schema`,
    );
  }
  return dst;
}

/** Whether two specs name one state: the same file (through any path to it), or the same database schema. */
function sameState(a: string, b: string): boolean {
  if (isPostgresState(a) !== isPostgresState(b)) return false;
  if (isPostgresState(a)) return normalUrl(a) === normalUrl(b);
  const real = (p: string): string => (existsSync(p) ? realpathSync(p) : resolve(p));
  return real(a) === real(b);
}

/** A database URL without its password, scheme spelling or default schema, to compare two. */
function normalUrl(spec: string): string {
  const shown = describeState(spec).replace(/^postgresql:/i, 'postgres:');
  try {
    const url = new URL(shown);
    if (url.searchParams.get('schema') === null) url.searchParams.set('schema', DEFAULT_SCHEMA);
    return url.toString();
  } catch {
    return shown;
  }
}
