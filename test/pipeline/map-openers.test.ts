import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import type { TableSource } from '../../src/pipeline/io/table.js';
import type { MapOpeners } from '../../src/pipeline/jobs/map-openers.js';
import { runMapFilesJob, type MapOptions } from '../../src/pipeline/jobs/map-files-job.js';
import type { StateSpec } from '../../src/pipeline/jobs/map-state.js';
import type { InputSpec } from '../../src/pipeline/jobs/run-input.js';
import type { ServiceTarget } from '../../src/pipeline/run/connection.js';

const TARGET: ServiceTarget = {
  baseUrl: 'http://127.0.0.1:9',
  isPublic: false,
  envFingerprint: 'uid2:test',
  envName: 'test',
  isLocal: false,
};

/** Stops the run at the state opener: what it was handed is all the test looks at. */
class StateOpened extends Error {}

/** A map run whose input, outputs and state are stand-ins; returns the specs the openers were handed. */
async function handedOn(options: Partial<MapOptions>): Promise<{ input?: InputSpec; state?: StateSpec }> {
  const seen: { input?: InputSpec; state?: StateSpec } = {};
  const table: TableSource = {
    header: ['email'],
    notes: [],
    name: 'in.tsv',
    totalBytes: undefined,
    bytesRead: () => 0,
    problems: () => ({ shortRows: 0, longRows: 0, extraKeys: 0 }),
    async *rows() {
      yield [{ line: 2, cells: ['a@example.com'] }];
    },
  };
  const open: MapOpeners = {
    input: async (spec) => {
      seen.input = spec;
      return table;
    },
    outputs: () => Promise.reject(new Error('no output is opened before the state')),
    emptyOutput: () => Promise.reject(new Error('the input is not empty')),
    badRows: async () => undefined,
    state: (spec) => {
      seen.state = spec;
      throw new StateOpened();
    },
  };
  const run = runMapFilesJob(
    { inputs: ['in.tsv'], reading: {}, output: { format: 'csv', quiet: true }, ...options },
    TARGET,
    {
      stdin: new PassThrough(),
      stdout: new PassThrough(),
      stderr: new PassThrough(),
      env: {},
      now: () => 1_700_000_000_000,
      open,
    },
  );
  await expect(run).rejects.toBeInstanceOf(StateOpened);
  return seen;
}

describe('a map run hands each opener its own settled spec', () => {
  it('the state opener gets where the state is and how it is used, nothing of the options', async () => {
    const { state } = await handedOn({ state: 'postgres://db.example/uid2' });
    expect(state).toEqual({
      location: 'postgres://db.example/uid2',
      mode: 'write',
      envFingerprint: 'uid2:test',
      api: 'v3',
    });
  });

  it('a dry run reads the state', async () => {
    const { state } = await handedOn({ state: 'postgres://db.example/uid2', dryRun: true });
    expect(state?.mode).toBe('read');
  });

  it('the input opener gets the input settled: the delimiter checked once, the defaults filled in', async () => {
    const { input } = await handedOn({ state: 'postgres://db.example/uid2', reading: { delimiter: 'tab' } });
    expect(input).toEqual({
      parts: [{ path: 'in.tsv', format: 'csv' }],
      format: 'csv',
      reading: { delimiter: '\t', encoding: 'utf8', header: true, chunkRows: 2000 },
      shard: undefined,
    });
  });
});
