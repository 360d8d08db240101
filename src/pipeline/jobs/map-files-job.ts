/** A whole map run of files: inputs opened, columns chosen, the state file, the connection, the outputs, the ending. */
import { existsSync } from 'node:fs';
import type { PhoneRegion } from '../../identity/index.js';
import { closeOnFailure } from '../io/close-on-failure.js';
import type { TableInfo, TableSource } from '../io/table.js';
import type { ColumnFlags, IdentifierColumn } from '../map/identifier-columns.js';
import { MapEngine, REMEMBERED_IDENTIFIERS, type MapRunCounts, type MapRunResult } from '../map/map-engine.js';
import { phoneRegionHint, readsRegion } from '../map/phone-region-hint.js';
import type { ResultLayout } from '../map/result-columns.js';
import type { LayoutRequest } from '../map/result-layout.js';
import type { BadRowFlags, BadRowsOutput } from '../run/bad-rows-output.js';
import { runBatchCommand, type BatchPlan } from '../run/batch-run.js';
import { chooseConcurrency, type ServiceClient, type ServiceTarget } from '../run/connection.js';
import { EXIT, UserError } from '../run/exit-codes.js';
import type { OutputFlags } from '../run/output-options.js';
import { sayTo, type InputRunDeps, type Say } from '../run/run-deps.js';
import { KNOWN_FAILURES as BATCH_KNOWN_FAILURES } from '../run/run-report.js';
import { planThreads, type ThreadPlan } from '../run/run-plan.js';
import { formatCount, makeSummary, writeSummaryJson, type RunSummary } from '../run/summary.js';
import { releaseYoungGeneration } from '../run/young-generation.js';
import type { Shard } from '../shard/shard-spec.js';
import { isPreparingSource } from '../threads/parquet-read-thread.js';
import { isPieceSource, type TableInput } from '../threads/table-input.js';
import { v2DeprecationWarning } from '../v2/v2-notice.js';
import { mayBeHeaderless } from './headerless-input.js';
import { chooseMapColumns } from './map-columns.js';
import { settleEngine, type EngineSpec } from './map-engine-spec.js';
import { mapOutputColumns, runMapJob } from './map-job.js';
import {
  notWritten,
  reportSummary,
  settleOutputs,
  settleWritten,
  type OpenOutputs,
  type OutputSpec,
} from './map-outputs.js';
import { MAP_OPENERS, type MapOpeners } from './map-openers.js';
import type { MapStateFile, StateSpec } from './map-state.js';
import { plainInputBytes, settleInput, type InputReading, type InputSpec } from './run-input.js';
import { describeState, isPostgresState } from '../../state/open-backend.js';
import { StateNotFoundError } from '../../state/index.js';

/** What a map run of files is asked to do, checked once: inputs, columns, outputs, state, limits. */
export interface MapOptions extends ColumnFlags, Partial<BadRowFlags> {
  /** The input files, expanded (a '-' reads stdin); read as one run. */
  inputs: string[];
  /** How the inputs are read: format, header, delimiter, encoding. */
  reading: InputReading;
  /** --output-dir: one output per input part, at `paths` (in the parts' order), instead of -o. */
  outputDir?: { dir: string; paths: string[] } | undefined;
  state?: string | undefined;
  rejects?: string | undefined;
  /** Default 20; at most 20 against the public service. */
  concurrency?: number | undefined;
  /** Default and maximum 5,000. */
  batchSize?: number | undefined;
  /** --shard K/N: this runner maps its share of the input, and writes a header row only as the first runner (K = 0). */
  shard?: Shard | undefined;
  failFast?: boolean | undefined;
  dryRun?: boolean | undefined;
  /** v3 (default), or the deprecated v2 map: one identity kind per request, salt buckets instead of r. */
  api?: 'v3' | 'v2' | undefined;
  /** --threads, for the planner (pipeline/run/run-plan.ts). */
  threads?: number | 'auto' | undefined;
  /** --keep, --drop-input-columns, --result-prefix, --emit-hash (the time format is output.timeFormat). */
  layout?: Omit<LayoutRequest, 'timeFormat'> | undefined;
  /** --phone-region: national phone numbers are read as this country's. */
  phoneRegion?: PhoneRegion | undefined;
  /** The profile's phone_region as written, and where it came from: the region when --phone-region is absent. */
  profilePhoneRegion?: { value: string; from: string } | undefined;
  /** --phone-region-col: each row's phones are read in the country this column names. */
  phoneRegionColumn?: string | undefined;
  /** --null-value: identifier cells so written are missing (besides empty cells and \N). */
  nullValues?: string[] | undefined;
  output: OutputFlags;
}

/** What a map run touches besides its options: the run's deps, and what opens its input, outputs and state. */
export interface MapJobDeps extends InputRunDeps {
  /** For tests: stand-ins for what the run opens (default: MAP_OPENERS, the files, threads, S3 and databases). */
  open?: MapOpeners | undefined;
}

/**
 * `map` of files: returns the exit code (0, 3 some rows error, 9 records that could not be read were skipped,
 * 130 interrupted); throws for the rest.
 */
export async function runMapFilesJob(options: MapOptions, target: ServiceTarget, deps: MapJobDeps): Promise<number> {
  const open = deps.open ?? MAP_OPENERS;
  const engine = settleEngine(options);
  const dryRun = engine.dryRun;
  // settled before anything is sent: s3:// patterns listed, the format and delimiter checked, the shard's range found
  const input = await settleInput(options.inputs, options.reading, options.shard);
  const outputs = settleOutputs(options, input.parts.length);
  const api = engine.api;
  const state: StateSpec | undefined =
    options.state === undefined
      ? undefined
      : { location: options.state, mode: dryRun ? 'read' : 'write', envFingerprint: target.envFingerprint, api };
  const plan = planThreads({
    command: 'map',
    threads: options.threads,
    inputBytes: options.threads === 'auto' ? await plainInputBytes(input) : undefined,
    dryRun,
    outputDir: outputs.outputDir !== undefined,
    outputFormat: outputs.format,
  });
  const say = sayTo(options.output, deps);
  const badRows = await open.badRows(outputs.badRows, say);
  let code: number;
  try {
    code = await mapInput({
      engine,
      input,
      outputs,
      state,
      plan,
      target,
      deps,
      open,
      say,
      startedMs: deps.now(),
      badRows,
    });
  } catch (err) {
    await badRows?.abort();
    throw err;
  }
  return badRows === undefined ? code : badRows.end(code);
}

/** One map run of files, each concern settled: what each of its steps needs. */
interface MapRun {
  /** The steps' settings, settled once (map-engine-spec.ts). */
  engine: EngineSpec;
  input: InputSpec;
  outputs: OutputSpec;
  /** --state, as the run uses it; undefined without one. */
  state: StateSpec | undefined;
  plan: ThreadPlan;
  target: ServiceTarget;
  deps: InputRunDeps;
  open: MapOpeners;
  say: Say;
  startedMs: number;
  badRows: BadRowsOutput | undefined;
}

/** Opens the input as the run's plan of threads has it, chooses the columns, and runs the batch skeleton. */
async function mapInput(run: MapRun): Promise<number> {
  const { engine, input, plan, target, deps, open, say, startedMs } = run;
  const dryRun = engine.dryRun;
  // a deadline, not progress: said even with --quiet, so that cron mail carries it
  if (engine.api === 'v2') {
    deps.stderr.write(
      v2DeprecationWarning(
        'map --api v2 (POST /v2/identity/map)',
        'use v3: the same uid2-batch map command without --api v2 (uid2-batch migrate --state FILE converts a v2 state file)',
        startedMs,
      ),
    );
  }
  const source = await open.input(input, {
    stdin: deps.stdin,
    onBadRecord: run.badRows?.record,
    signal: deps.signal,
    readThread: plan.readThread,
    rowThreads: plan.rowThreads,
    findHeaderless: mayBeHeaderless(engine.columns, { format: input.format, header: input.reading.header }),
  });
  if (!plan.keepsYoungGenerationBounded(isPreparingSource(source))) releaseYoungGeneration();
  return closeOnFailure(source, async () => {
    for (const line of source.notes) say(line);
    if (source.header.length === 0) return emptyInput(run, source);
    const { columns, layout } = chooseMapColumns(engine.columns, source, say);
    // the row threads encode an output row once, for both files: the rejects share the output's format
    if (engine.rejectsNote !== undefined) say(engine.rejectsNote);
    const concurrency = chooseConcurrency(engine.concurrency, target, say);
    const choices: MapChoices = { source, columns, layout, concurrency, plan };
    return runBatchCommand<MapRunResult, MapStateFile | undefined>(
      {
        openState: () => openStateFor(run),
        plan: (state) =>
          dryRun && !isPieceSource(source) ? dryRunReport(run, source, columns, state) : mapPlan(run, choices, state),
      },
      deps,
    );
  });
}

/** The state of the run, if it names one; a dry run reads it, and only if it is there. */
function openStateFor({ state, open, say }: MapRun): MapStateFile | Promise<MapStateFile | undefined> | undefined {
  if (state === undefined) return undefined;
  const reading = state.mode === 'read';
  if (reading && !isPostgresState(state.location) && !existsSync(state.location)) {
    say(`--state ${state.location} does not exist yet: nothing would be answered from it`);
    return undefined;
  }
  const opened = open.state(state);
  if (!reading || !(opened instanceof Promise)) return opened;
  // a database schema with no state yet is to a dry run what a missing file is: nothing answered from it
  return opened.catch((err: unknown) => {
    if (!(err instanceof StateNotFoundError)) throw err;
    say(`--state ${err.path} has no state yet: nothing would be answered from it`);
    return undefined;
  });
}

/** A 0-byte input is an empty table, not a mistake: the output is empty too (no columns to name). */
async function emptyInput({ engine, outputs, open, startedMs, deps, say }: MapRun, source: TableInfo): Promise<number> {
  say(`${source.name} is empty: nothing to map`);
  if (!engine.dryRun) await open.emptyOutput(outputs, deps.stdout);
  const summary = makeSummary({
    command: 'map',
    rows: 0,
    startedMs,
    endedMs: deps.now(),
    extra: { outcome: 'completed' },
  });
  await reportSummary(outputs, summary, deps.stderr);
  return EXIT.ok;
}

/** What a run that sends has chosen before it connects. */
interface MapChoices {
  source: TableInput;
  columns: IdentifierColumn[];
  layout: ResultLayout;
  concurrency: number;
  plan: ThreadPlan;
}

/** A run that sends, as the batch skeleton runs it: its outputs, its engine, its summary and its ending. */
function mapPlan(run: MapRun, choices: MapChoices, state: MapStateFile | undefined): BatchPlan<MapRunResult> {
  const { engine, outputs, target, deps, open, say, startedMs, badRows } = run;
  const { source, columns, layout, concurrency, plan } = choices;
  const api = engine.api;
  const { header, types } = mapOutputColumns(source.header, columns, api, layout);
  let opened: OpenOutputs | undefined;
  return {
    command: 'map',
    target,
    connection: { kind: 'map', concurrency },
    record: {
      args: runArgs(engine, source, columns, concurrency, target),
      startS: Math.floor(startedMs / 1000),
      endS: () => Math.floor(deps.now() / 1000),
    },
    output: {
      columns: { header, types },
      options: engine.output,
      progressLabel: 'map',
      cron: false,
      open: async () => {
        opened = await open.outputs(outputs, {
          header,
          types,
          source,
          stdout: deps.stdout,
          encoderThreads: plan.encoderThreads(isPieceSource(source)) ?? 0,
        });
        return opened.sink;
      },
    },
    engine: async ({ client, limiter, sink, progress }) => {
      try {
        return await runMapJob({
          input: source,
          columns,
          client,
          limiter,
          output: { kind: 'table', sink, rejects: opened?.rejects, format: outputs.format, header, types },
          api,
          layout,
          threads: plan.engineThreads(isPieceSource(source)),
          state: state?.engineState,
          batchSize: engine.batchSize,
          failFast: engine.failFast,
          maxAttempts: target.maxAttempts ?? 6,
          signal: deps.signal,
          nowS: () => Math.floor(deps.now() / 1000),
          onProgress: (counts: MapRunCounts) =>
            progress.update({
              done: counts.rowsDone,
              ...estimateTotal(source, counts),
              retries: client.stats.retries,
              http429: client.stats.http429,
            }),
        });
      } catch (err) {
        await opened?.rejects?.abort();
        throw err;
      }
    },
    summary: (result, { client }) => {
      const summary = mapSummary(result, client, source, startedMs, deps.now(), state);
      if (api === 'v2') summary.api = 'v2';
      return summary;
    },
    finish: async (result, summary, { sink }) => {
      const hint = phoneRegionHint(readsRegion(columns), result.counts);
      if (hint !== undefined) say(hint);
      const written = { sink, rejects: opened?.rejects };
      try {
        return await finish(result, summary, { written, badRows, run, state });
      } catch (err) {
        await written.rejects?.abort();
        throw err;
      }
    },
  };
}

/** What the runs table records: how the run was asked for, never a credential. */
function runArgs(
  engine: EngineSpec,
  source: TableInfo,
  columns: IdentifierColumn[],
  concurrency: number,
  target: ServiceTarget,
): Record<string, unknown> {
  const { output, columns: asked } = engine;
  const region = columns.find((c) => c.phoneRegion !== undefined)?.phoneRegion;
  return {
    input: source.name,
    output: output.output ?? '-',
    format: output.format,
    columns: columns.map((c) => ({ name: c.name, kind: c.kind })),
    env: target.envName,
    base_url: target.isLocal ? 'embedded' : target.baseUrl,
    concurrency,
    batch_size: engine.batchSize,
    fail_fast: engine.failFast,
    ...(engine.api === 'v2' ? { api: 'v2' } : {}),
    ...(region !== undefined ? { phone_region: region } : {}),
    ...(asked.phoneRegionColumn !== undefined ? { phone_region_col: asked.phoneRegionColumn } : {}),
    ...(asked.nullValues !== undefined ? { null_values: asked.nullValues } : {}),
    ...(output.timeFormat !== undefined ? { time_format: output.timeFormat } : {}),
    ...(asked.layout.emitHash === true ? { emit_hash: true } : {}),
    ...(output.hashEncoding !== undefined ? { hash_encoding: output.hashEncoding } : {}),
    ...(asked.layout.keep !== undefined ? { keep: asked.layout.keep } : {}),
    ...(asked.layout.dropInputColumns === true ? { drop_input_columns: true } : {}),
  };
}

interface Finish {
  written: OpenOutputs;
  badRows: BadRowsOutput | undefined;
  run: MapRun;
  state: MapStateFile | undefined;
}

/** Commits or abandons the output by outcome, reports, and picks the exit code. */
async function finish(result: MapRunResult, summary: RunSummary, f: Finish): Promise<number> {
  const { outcome } = result;
  const { engine, outputs, state, deps, say } = f.run;
  // the run's files replace their targets together, and only when it completed
  await settleWritten(outputs, f.written, [f.badRows], outcome.kind === 'completed', summary);
  await reportSummary(outputs, summary, deps.stderr);
  const repeats = result.counts.repeatsSent;
  if (repeats > 0) {
    say(
      `about ${formatCount(repeats)} repeated identifier(s) were sent again: they came more than ` +
        `${formatCount(REMEMBERED_IDENTIFIERS)} distinct identifiers after their first one, more than a run without ` +
        'a state file remembers; with --state FILE each is sent once',
    );
  }
  switch (outcome.kind) {
    case 'completed': {
      const errors = result.counts.status.error;
      if (errors === 0) return EXIT.ok;
      say(
        `${formatCount(errors)} identifier(s) ended in error (see the reason column${outputs.rejects ? ` and ${outputs.rejects}` : ''}); ` +
          (f.state
            ? 're-run the same command to retry only those'
            : 'add --state FILE to retry only those on a re-run'),
      );
      return EXIT.partial;
    }
    case 'interrupted':
      say(
        `interrupted: ${notWritten(outputs)}; ` +
          (f.state
            ? `${formatCount(result.counts.batchesCommitted)} answered batch(es) are saved in ${describeState(state?.location ?? '')}: re-run the same command to resume`
            : 'nothing was saved (use --state FILE to make a re-run resume)'),
      );
      return EXIT.interrupted;
    case 'auth-refused':
      throw outcome.error;
    case 'failed': {
      const error = outcome.error;
      const saved = f.state
        ? `; answered batches are saved in ${describeState(state?.location ?? '')}, a re-run resumes`
        : '';
      if (!KNOWN_FAILURES.has(error.name)) throw error;
      const lead =
        engine.failFast && !LOCAL_FAILURES.has(error.name) ? 'stopped at the first failed request (--fail-fast): ' : '';
      throw new UserError(`${lead}${error.message}; ${notWritten(outputs)}${saved}`, EXIT.failed);
    }
  }
}

/** Failures of the input, the output or the machine, as opposed to the service's answers. */
const LOCAL_FAILURES = new Set(['InputError', 'OutputError', 'ClockSkewError', 'SqliteError']);
/** The batch commands' known failures, and map's own input's. */
const KNOWN_FAILURES: ReadonlySet<string> = new Set([...BATCH_KNOWN_FAILURES, 'InputError']);

function estimateTotal(source: TableInfo, counts: MapRunCounts): { total?: number; totalIsEstimate?: boolean } {
  const total = source.totalBytes;
  const read = source.bytesRead();
  if (total === undefined || read <= 0 || counts.rowsRead === 0) return {};
  if (read >= total) return { total: counts.rowsRead, totalIsEstimate: false };
  return { total: Math.round((counts.rowsRead * total) / read), totalIsEstimate: true };
}

function mapSummary(
  result: MapRunResult,
  client: ServiceClient,
  source: TableInfo,
  startedMs: number,
  endedMs: number,
  state: MapStateFile | undefined,
): RunSummary {
  const c = result.counts;
  const problems = source.problems();
  return makeSummary({
    command: 'map',
    rows: c.rowsDone,
    status: c.status,
    unique_identifiers: c.uniqueIdentifiers,
    from_state: c.fromState,
    requests: client.stats.requests,
    retries: client.stats.retries,
    http_429: client.stats.http429,
    startedMs,
    endedMs,
    extra: {
      outcome: result.outcome.kind,
      rows_read: c.rowsRead,
      bytes_read: source.bytesRead(),
      identifiers: c.identifiers,
      ...(c.uniqueEstimated ? { unique_identifiers_estimated: true } : {}),
      deduplicated: c.deduplicated,
      repeats_sent: c.repeatsSent,
      ...(c.repeatsEstimated ? { repeats_sent_estimated: true } : {}),
      batches: c.batches,
      batches_failed: c.batchesFailed,
      ...(state !== undefined ? { batches_committed: c.batchesCommitted } : {}),
      invalid_by_reason: c.invalidByReason,
      short_rows: problems.shortRows,
      long_rows: problems.longRows,
      ...(problems.badRows !== undefined ? { bad_rows: problems.badRows } : {}),
    },
  });
}

async function dryRunReport(
  { engine, outputs, startedMs, deps, say }: MapRun,
  source: TableSource,
  columns: IdentifierColumn[],
  state: MapStateFile | undefined,
): Promise<number> {
  const counting = new MapEngine({
    columns,
    dryRun: true,
    ...(state !== undefined ? { state: state.engineState } : {}),
    batchSize: engine.batchSize,
    ...(deps.signal !== undefined ? { signal: deps.signal } : {}),
    nowS: () => Math.floor(deps.now() / 1000),
  });
  const result = await counting.run(source.rows());
  const c = result.counts;
  if (result.outcome.kind === 'failed' || result.outcome.kind === 'auth-refused') throw result.outcome.error;
  const invalid = Object.values(c.invalidByReason).reduce((a, b) => a + b, 0);
  const reasons = Object.entries(c.invalidByReason)
    .sort((a, b) => b[1] - a[1])
    .map(([reason, n]) => `  ${formatCount(n)} ${reason}`);
  const unique = `${c.uniqueEstimated ? '~' : ''}${formatCount(c.uniqueIdentifiers)}`;
  const lines = [
    `map --dry-run: nothing was sent${result.outcome.kind === 'interrupted' ? ' (interrupted: counts cover the rows read)' : ''}`,
    `  ${formatCount(c.rowsRead)} rows, ${formatCount(c.identifiers)} identifier cell(s) in ${columns.length} column(s): ${columns.map((col) => `'${col.name}' (${col.kind})`).join(', ')}`,
    `  ${formatCount(c.valid)} valid, ${formatCount(invalid)} invalid${invalid > 0 ? ':' : ''}`,
    ...reasons.map((r) => `  ${r}`),
    `  ${unique} unique hashes`,
    ...(state !== undefined ? [`  ${formatCount(c.fromState)} answered from the state file`] : []),
    `  ${formatCount(c.batches)} request(s) would be sent (${formatCount(c.itemsInBatches)} identifiers, up to ${formatCount(engine.batchSize)} per request)`,
  ];
  if (!outputs.quiet) deps.stderr.write(`${lines.join('\n')}\n`);
  const hint = phoneRegionHint(readsRegion(columns), c);
  if (hint !== undefined) say(hint);
  if (outputs.summaryJson !== undefined) {
    const summary = makeSummary({
      command: 'map',
      rows: c.rowsRead,
      status: { invalid },
      unique_identifiers: c.uniqueIdentifiers,
      from_state: c.fromState,
      startedMs,
      endedMs: deps.now(),
      extra: {
        dry_run: true,
        valid: c.valid,
        invalid_by_reason: c.invalidByReason,
        batches: c.batches,
        identifiers_to_send: c.itemsInBatches,
        ...(source.problems().badRows !== undefined ? { bad_rows: source.problems().badRows } : {}),
      },
    });
    await writeSummaryJson(outputs.summaryJson, summary);
  }
  return result.outcome.kind === 'interrupted' ? EXIT.interrupted : EXIT.ok;
}
