/**
 * Worker thread entry of the state thread (state-thread.ts): one connection to the state file that looks up and
 * commits for the engine, in the order asked. Loaded by file URL from dist/.
 */
import { workerData } from 'node:worker_threads';
import { openState } from '../../state/open.js';
import type { StateStore } from '../../state/types.js';
import { serveTasks, type TaskResult } from '../workers/worker-pool.js';
import { unpackUpdates, type StateThreadAnswer, type StateThreadConfig, type StateThreadTask } from './state-thread.js';

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

serveTasks<StateThreadTask, StateThreadAnswer>((task) => {
  switch (task.op) {
    case 'lookup':
      return lookup(task.type, task.hashes);
    case 'commit':
      opened().commitBatch(unpackUpdates(task.updates), task.nowS);
      return { output: null };
    case 'close':
      store?.close();
      store = null;
      return { output: null };
  }
});
