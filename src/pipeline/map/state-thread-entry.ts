/**
 * Worker thread entry of the state thread (state-thread.ts): one connection to the state file that looks up and
 * commits for the engine, in the order asked. Loaded by file URL from dist/.
 */
import { workerData } from 'node:worker_threads';
import { openState } from '../../state/open.js';
import { STATUS_CODE } from '../../state/schema.js';
import type { StateStore } from '../../state/types.js';
import { serveTasks, type TaskResult } from '../workers/worker-pool.js';
import {
  unpackUpdates,
  type StateThreadAnswer,
  type StateThreadConfig,
  type StateThreadTask,
  type StoredEntries,
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
  const found = opened().lookupHashes(type, hashes);
  const n = found.size;
  const entries: StoredEntries = {
    at: new Int32Array(n),
    status: new Uint8Array(n),
    due: new Uint8Array(n),
    r: new Float64Array(n),
    u: new Array<string | null>(n),
    p: new Array<string | null>(n),
    bucketId: new Array<string | null>(n),
  };
  if (n > 0) {
    let k = 0;
    for (let i = 0; i < hashes.length && k < n; i++) {
      const entry = found.get(hashes[i]);
      if (entry === undefined) continue;
      // a hash asked twice is answered at its first position only, as the engine asks each once
      found.delete(hashes[i]);
      entries.at[k] = i;
      entries.status[k] = STATUS_CODE[entry.status];
      entries.due[k] = entry.due ? 1 : 0;
      entries.r[k] = entry.r ?? Number.NaN;
      entries.u[k] = entry.u;
      entries.p[k] = entry.p;
      entries.bucketId[k] = entry.bucketId;
      k++;
    }
  }
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
