import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { runBatchCommand, type BatchPlan } from '../../src/pipeline/run/batch-run.js';
import type { ServiceClient, ServiceTarget } from '../../src/pipeline/run/connection.js';
import type { RunDeps } from '../../src/pipeline/run/run-deps.js';
import type { BatchRunResult } from '../../src/pipeline/run/run-report.js';
import { makeSummary } from '../../src/pipeline/run/summary.js';
import type { StateStore } from '../../src/state/index.js';
import type { TableSink } from '../../src/pipeline/io/table.js';

// The batch-run skeleton calls a command's parts in one order, with the state file and the connection opened
// and closed around them; called here with a fake state and an injected client, without the command parser.

const target: ServiceTarget = {
  baseUrl: 'http://127.0.0.1:9',
  isPublic: false,
  envFingerprint: 'test',
  envName: 'test',
  isLocal: false,
};

function fakeState(calls: string[]): StateStore {
  return {
    startRun: (command: string) => {
      calls.push(`startRun ${command}`);
      return 7;
    },
    finishRun: (runId: number, _summary: string, exitCode: number) => void calls.push(`finishRun ${runId} ${exitCode}`),
    close: () => void calls.push('close'),
  } as unknown as StateStore;
}

function deps(stderr = new PassThrough()): RunDeps {
  const client = { stats: { requests: 0, retries: 0, http429: 0 } } as unknown as ServiceClient;
  return { stdout: new PassThrough().resume(), stderr, env: {}, now: () => 1_000, client };
}

const completed: BatchRunResult = { outcome: { kind: 'completed' }, counts: { status: { error: 0 } } };

function plan(calls: string[], overrides: Partial<BatchPlan<BatchRunResult>> = {}): BatchPlan<BatchRunResult> {
  return {
    command: 'remap-due',
    target,
    connection: { kind: 'map', concurrency: 2 },
    record: { args: {}, startS: 1, endS: () => 2 },
    beforeOutput: async () => void calls.push('beforeOutput'),
    output: { columns: ['hash'], options: { format: 'csv', quiet: true }, progressLabel: 'remap-due', cron: true },
    total: () => {
      calls.push('total');
      return 3;
    },
    replay: async (sink) => {
      calls.push('replay');
      await sink.writeRows([['earlier']]);
      return 1;
    },
    engine: async ({ runId, limiter }) => {
      calls.push(`engine ${runId} ${limiter !== undefined}`);
      return completed;
    },
    summary: () => {
      calls.push('summary');
      return makeSummary({ command: 'remap-due', rows: 0, startedMs: 0, endedMs: 1 });
    },
    finish: async (_result, _summary, { sink, replayed }) => {
      calls.push(`finish ${replayed}`);
      await sink.abort();
      return 0;
    },
    ...overrides,
  };
}

describe('runBatchCommand', () => {
  it('runs the parts in their order between opening and closing the state', async () => {
    const calls: string[] = [];
    const code = await runBatchCommand({ openState: () => fakeState(calls), plan: () => plan(calls) }, deps());
    expect(code).toBe(0);
    expect(calls).toEqual([
      'startRun remap-due',
      'beforeOutput',
      'total',
      'replay',
      'engine 7 true',
      'summary',
      'finishRun 7 0',
      'finish 1',
      'close',
    ]);
  });

  it('ends at the plan when it gives an exit code: nothing is connected or recorded', async () => {
    const calls: string[] = [];
    const code = await runBatchCommand({ openState: () => fakeState(calls), plan: () => 3 }, deps());
    expect(code).toBe(3);
    expect(calls).toEqual(['close']);
  });

  it('a run without a state file records nothing; its engine gets run id 0', async () => {
    const calls: string[] = [];
    const code = await runBatchCommand(
      { openState: () => undefined, plan: () => plan(calls, { connection: { kind: 'plain', connections: 1 } }) },
      deps(),
    );
    expect(code).toBe(0);
    expect(calls).toContain('engine 0 false');
    expect(calls.some((c) => c.startsWith('startRun') || c.startsWith('finishRun'))).toBe(false);
  });

  it('closes the state when the engine throws, and passes the error on', async () => {
    const calls: string[] = [];
    const failure = new Error('engine failed');
    await expect(
      runBatchCommand(
        {
          openState: () => fakeState(calls),
          plan: () =>
            plan(calls, {
              engine: async () => {
                throw failure;
              },
            }),
        },
        deps(),
      ),
    ).rejects.toBe(failure);
    expect(calls.at(-1)).toBe('close');
    expect(calls.some((c) => c.startsWith('finishRun'))).toBe(false);
  });

  it("writes to the command's own output when it opens one, and drops it when the engine throws", async () => {
    const calls: string[] = [];
    const rows: string[][] = [];
    const own = (name: string) =>
      ({
        writeRows: async (batch: string[][]) => void rows.push(...batch),
        commit: async () => void calls.push(`commit ${name}`),
        abort: async () => void calls.push(`abort ${name}`),
      }) as unknown as TableSink;
    const code = await runBatchCommand(
      {
        openState: () => undefined,
        plan: () =>
          plan(calls, {
            output: {
              columns: ['hash'],
              options: { format: 'csv', quiet: true },
              progressLabel: 'map',
              cron: false,
              open: async () => own('parts'),
            },
            finish: async (_result, _summary, { sink }) => {
              await sink.commit();
              return 0;
            },
          }),
      },
      deps(),
    );
    expect(code).toBe(0);
    expect(rows).toEqual([['earlier']]);
    expect(calls).toContain('commit parts');
    const failure = new Error('engine failed');
    await expect(
      runBatchCommand(
        {
          openState: () => undefined,
          plan: () =>
            plan(calls, {
              output: {
                columns: ['hash'],
                options: { format: 'csv', quiet: true },
                progressLabel: 'map',
                cron: false,
                open: async () => own('failed'),
              },
              engine: async () => {
                throw failure;
              },
            }),
        },
        deps(),
      ),
    ).rejects.toBe(failure);
    expect(calls.at(-1)).toBe('abort failed');
  });

  it('waits for a state that closes in the background before it returns', async () => {
    const calls: string[] = [];
    const state = {
      startRun: () => 1,
      finishRun: () => undefined,
      close: () => new Promise<void>((resolve) => setTimeout(() => resolve(void calls.push('closed')), 5)),
    };
    await runBatchCommand({ openState: () => state, plan: () => 2 }, deps());
    expect(calls).toEqual(['closed']);
  });
});
