/**
 * Worker thread entry of the state thread (state-thread.ts): one connection to the state file that looks up and
 * commits for the engine, in the order asked. Loaded by file URL from dist/.
 */
import { workerData } from 'node:worker_threads';
import { openState } from '../../state/open.js';
import type { StateStore } from '../../state/index.js';
import { serveTasks, type TaskResult } from '../workers/worker-pool.js';
import {
  unpackUpdates,
  type PackedUpdates,
  type StateThreadAnswer,
  type StateThreadConfig,
  type StateThreadTask,
} from './state-thread.js';

const config = workerData as StateThreadConfig;
// the main thread opened the file first: it exists, has the current schema, and is this run's to write
let store: StateStore | null = openState(config.path, {
  envFingerprint: config.envFingerprint,
  api: config.api,
  create: false,
});

function opened(): StateStore {
  if (store === null) throw new Error('the state file was already closed');
  return store;
}

function lookup(type: 'email' | 'phone', hashes: readonly string[]): TaskResult<StateThreadAnswer> {
  const entries = opened().lookupStored(type, hashes);
  return {
    output: entries,
    transfer: [entries.at.buffer, entries.status.buffer, entries.due.buffer, entries.r.buffer] as ArrayBuffer[],
  };
}

/** A commit waiting for its group's transaction. */
interface Waiting {
  resolve(result: TaskResult<StateThreadAnswer>): void;
  reject(error: unknown): void;
}

/**
 * Commits that arrive together share one transaction: each batch touches about one leaf of the r index per
 * day of refresh times, and a transaction of several batches writes each of those pages once instead of once
 * per batch. The group is committed once the commits waiting in this thread's queue are taken (setImmediate
 * runs after them) or once it holds GROUP_BATCHES; only then is each of its batches answered as committed, so
 * the engine hands nothing on that a crash could still lose.
 */
const GROUP_BATCHES = 4;
let group: Waiting[] = [];
let flushQueued = false;

function commit(updates: PackedUpdates, nowS: number): Promise<TaskResult<StateThreadAnswer>> {
  const s = opened();
  if (group.length === 0) s.beginGroup();
  try {
    s.commitBatch(unpackUpdates(updates), nowS);
  } catch (err) {
    // what went wrong may have ended the transaction: the whole group fails with this batch
    failGroup(err);
    return Promise.reject(err);
  }
  return new Promise((resolve, reject) => {
    group.push({ resolve, reject });
    if (group.length >= GROUP_BATCHES) flush();
    else if (!flushQueued) {
      flushQueued = true;
      setImmediate(flush);
    }
  });
}

function flush(): void {
  flushQueued = false;
  if (group.length === 0) return;
  const committed = group;
  try {
    opened().endGroup();
  } catch (err) {
    failGroup(err);
    return;
  }
  group = [];
  for (const waiting of committed) waiting.resolve({ output: null });
}

function failGroup(err: unknown): void {
  const failed = group;
  group = [];
  try {
    store?.abortGroup();
  } catch {
    // the batches fail with the first error; the connection is closed with the run
  }
  for (const waiting of failed) waiting.reject(err);
}

serveTasks<StateThreadTask, StateThreadAnswer>((task) => {
  switch (task.op) {
    case 'lookup':
      return lookup(task.type, task.hashes);
    case 'commit':
      return commit(task.updates, task.nowS);
    case 'close':
      flush();
      store?.close();
      store = null;
      return { output: null };
  }
});
