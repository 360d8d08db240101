/** The one skeleton of a batch run: open, connect, start the run, output, replay changes, engine, summary, finish. */
import type { TableSink } from '../io/table.js';
import type { TypedHeader } from '../io/typed-cells.js';
import type { AdaptiveConcurrency } from './adaptive-limiter.js';
import {
  connect,
  connectForMapping,
  type ServiceClient,
  type ServiceConnection,
  type ServiceTarget,
} from './connection.js';
import type { OutputFlags } from './output-options.js';
import { sayTo, type RunDeps, type RunProgress } from './run-deps.js';
import { exitCodeOf, replayedLine, withRunOutput, type BatchRunResult } from './run-report.js';
import type { RunSummary } from './summary.js';

/** What the skeleton needs of a command's state (a file or a database): its runs table, and closing it at the end. */
export interface RunState {
  startRun(command: string, argsJson: string, nowS: number): number | Promise<number>;
  finishRun(id: number, summaryJson: string, exitCode: number, nowS: number): void | Promise<void>;
  close(): void | Promise<void>;
}

/** A batch command as the skeleton runs it: what it opens, and how it plans its run once that is open. */
export interface BatchCommand<R extends BatchRunResult, S extends RunState | undefined> {
  /** Opens the state the run reads and records in (undefined: a run of input files); closed when it ends. */
  openState(): S | Promise<S>;
  /** Looks at what was opened: an exit code ends the run there (a dry run, nothing to do); a plan runs it. */
  plan(state: S): BatchPlan<R> | number | Promise<BatchPlan<R> | number>;
}

/** How one batch run goes, in the commands' own words; the skeleton calls each part in its turn. */
export interface BatchPlan<R extends BatchRunResult> {
  /** The runs table's name of the command. */
  command: string;
  target: ServiceTarget;
  /**
   * `map`: map requests, as many sockets as requests in flight, and a 429 lowers the concurrency for a while;
   * `plain`: the requests go on `connections` sockets as the engine sends them (opt-out checks).
   */
  connection: { kind: 'map'; concurrency: number } | { kind: 'plain'; connections: number };
  /** The runs table's record of the run in the state file: how it was asked for, and its start and end times. */
  record?: { args: Record<string, unknown>; startS: number; endS(): number };
  /** Work between connecting and opening the output (v2: asking which salt buckets rotated). */
  beforeOutput?(client: ServiceClient): Promise<void>;
  output: {
    /** Names, or names with types for JSONL and Parquet. */
    columns: readonly string[] | TypedHeader;
    options: OutputFlags;
    progressLabel: string;
    /** No progress when stderr is not a terminal: only the summary line. */
    cron: boolean;
    /** The command's own output (one file per input part, encoder threads); absent: -o or stdout. */
    open?: (() => Promise<TableSink>) | undefined;
  };
  /** The progress total, once the work before the output is done. */
  total?(): number;
  /** Writes the changes an earlier run left pending first, and says how many. */
  replay?(sink: TableSink): Promise<number>;
  engine(run: EngineRun): Promise<R>;
  summary(result: R, run: { client: ServiceClient; replayed: number }): RunSummary;
  /** Keeps or drops the output, reports, and picks the exit code. */
  finish(result: R, summary: RunSummary, run: { sink: TableSink; replayed: number }): Promise<number>;
}

/** What the engine of a run is given. */
export interface EngineRun {
  client: ServiceClient;
  /** With a `map` connection: the concurrency the client's 429s lower. */
  limiter: AdaptiveConcurrency | undefined;
  sink: TableSink;
  progress: RunProgress;
  /** The run's row in the runs table, which the changes it journals carry; 0 for a run not recorded. */
  runId: number;
}

/** Runs a batch command: returns its exit code; throws for failures the command's finish does not turn into one. */
export async function runBatchCommand<R extends BatchRunResult, S extends RunState | undefined>(
  command: BatchCommand<R, S>,
  deps: RunDeps,
): Promise<number> {
  const state = await command.openState();
  try {
    const plan = await command.plan(state);
    if (typeof plan === 'number') return plan;
    return await runPlan(plan, state, deps);
  } finally {
    await state?.close();
  }
}

async function runPlan<R extends BatchRunResult>(
  plan: BatchPlan<R>,
  state: RunState | undefined,
  deps: RunDeps,
): Promise<number> {
  const say = sayTo(plan.output.options, deps);
  const injected = deps.client !== undefined ? { client: deps.client } : {};
  let limiter: AdaptiveConcurrency | undefined;
  let connection: ServiceConnection;
  if (plan.connection.kind === 'map') {
    const mapping = await connectForMapping(plan.target, plan.connection.concurrency, injected);
    limiter = mapping.limiter;
    connection = mapping;
  } else connection = await connect(plan.target, { connections: plan.connection.connections, ...injected });
  const { client } = connection;
  try {
    const record = plan.record;
    const runId =
      record !== undefined && state !== undefined
        ? await state.startRun(plan.command, JSON.stringify(record.args), record.startS)
        : 0;
    await plan.beforeOutput?.(client);
    const { columns, progressLabel, cron, options, open } = plan.output;
    const work = async (sink: TableSink, progress: RunProgress): Promise<number> => {
      if (plan.total !== undefined) progress.update({ done: 0, total: plan.total() });
      const replayed = plan.replay !== undefined ? await plan.replay(sink) : 0;
      if (replayed > 0) say(replayedLine(replayed));
      const result = await plan.engine({ client, limiter, sink, progress, runId });
      progress.stop();
      const summary = plan.summary(result, { client, replayed });
      if (record !== undefined)
        await state?.finishRun(runId, JSON.stringify(summary), exitCodeOf(result), record.endS());
      return await plan.finish(result, summary, { sink, replayed });
    };
    return await withRunOutput(columns, progressLabel, cron, options, deps, work, open);
  } finally {
    await connection.close();
  }
}
