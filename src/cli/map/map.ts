import { existsSync } from 'node:fs';
import type { Command } from 'commander';
import { envFingerprint, type ConnectionFlags, type ResolvedConfig } from '../../config/index.js';
import { runMapJob, mapOutputColumns } from '../../pipeline/jobs/map-job.js';
import type { ResultLayout } from '../../pipeline/map/result-columns.js';
import { resolveResultLayout, type LayoutRequest } from '../../pipeline/map/result-layout.js';
import { headerlessColumns, mayBeHeaderless, readAsHeaderless } from '../../pipeline/jobs/headerless-input.js';
import {
  MapEngine,
  REMEMBERED_IDENTIFIERS,
  type MapRunCounts,
  type MapRunResult,
} from '../../pipeline/map/map-engine.js';
import {
  ColumnError,
  resolveIdentifierColumns,
  type ColumnFlags,
  type IdentifierColumn,
} from '../../pipeline/map/identifier-columns.js';
import { formatOfExtension } from '../../pipeline/io/format-names.js';
import { requireTextColumns } from '../../pipeline/io/parquet/parquet-columns.js';
import { commitTogether } from '../../pipeline/io/output/commit-together.js';
import { openSink } from '../../pipeline/io/output/sink.js';
import type { OpenSourceOptions, TableInfo, TableSink, TableSource } from '../../pipeline/io/table.js';
import { closeOnFailure } from '../../pipeline/io/close-on-failure.js';
import { isPieceSource, openTableInputs, type TableInput } from '../../pipeline/threads/table-input.js';
import { isPreparingSource } from '../../pipeline/threads/parquet-read-thread.js';
import {
  chooseConcurrency,
  connectForMapping,
  PUBLIC_MAX_CONCURRENCY,
  type ServiceClient,
} from '../../pipeline/run/connection.js';
import { resolveFor, runInProcess, sayTo, serviceTargetOf, type InputCommandDeps } from '../shared/command-context.js';
import { BadRowsOutput, type BadRowFlags } from '../../pipeline/run/bad-rows-output.js';
import { addBadRowOptions, badRowFlags } from '../shared/bad-rows.js';
import { EXIT, UserError } from '../shared/exit-codes.js';
import {
  addTableInputOptions,
  expandInputArgs,
  inputArgs,
  sourceOptionsOf,
  tableInputFlags,
  type InputFlags,
} from '../shared/input-options.js';
import {
  addConnectionOptions,
  addOutputOptions,
  addHashEncodingOption,
  addTimeFormatOption,
  connectionFlags,
  outputFlags,
  sinkCompression,
  wholeNumber,
  type OutputFlags,
} from '../shared/options.js';
import { addOutputDirOption, outputDirOf, partOutputPaths, partSinksFor } from '../shared/output-dir.js';
import { refuseOverlappingPaths, standardOutputs } from '../shared/output-paths.js';
import { createProgress, type ProgressReporter } from '../shared/progress.js';
import { exitCodeOf, KNOWN_FAILURES as BATCH_KNOWN_FAILURES } from '../../pipeline/run/run-report.js';
import {
  formatCount,
  makeSummary,
  printSummary,
  writeSummaryJson,
  type RunSummary,
} from '../../pipeline/run/summary.js';
import { addThreadsOption, threadsFlag } from '../shared/threads-option.js';
import { defaultMapThreads, planThreads, type ThreadPlan } from '../../pipeline/run/run-plan.js';
import { v2DeprecationWarning } from '../../pipeline/v2/v2-notice.js';
import { releaseYoungGeneration } from '../../pipeline/run/young-generation.js';
import { collectRepeated } from '../shared/repeated-flags.js';
import {
  addPhoneRegionOption,
  chooseRegion,
  phoneRegionColumnFlagOf,
  phoneRegionColumnIndex,
  phoneRegionFlagOf,
  withPhoneRegion,
} from '../shared/phone-region-option.js';
import { phoneRegionHint, readsRegion } from '../shared/phone-region-hint.js';
import { addNullValueOption, nullValuesOf, withNullMarkers } from '../shared/null-value-option.js';
import type { PhoneRegion } from '../../identity/index.js';
import { openMapState, type MapStateFile } from '../../pipeline/jobs/map-state.js';

/** Input and identifier columns as every table-reading command takes them, plus what map adds. */
export interface MapFlags extends ColumnFlags, Partial<BadRowFlags> {
  /** File, '-' for stdin, or undefined (stdin when it is not a terminal). */
  input?: string;
  /** Several inputs, directories or patterns, read as one run (see pipeline/io/input-parts.ts); `input` is the first. */
  inputs?: string[];
  /** One output per input in this directory, named as the input (instead of -o). */
  outputDir?: string;
  inputFormat?: InputFlags['inputFormat'];
  delimiter?: string;
  encoding?: InputFlags['encoding'];
  /** false: the first line is data; columns are named col1..colN. */
  header?: boolean;
  state?: string;
  rejects?: string;
  /** Default 20; at most 20 against the public service. */
  concurrency?: number;
  /** Default and maximum 5,000. */
  batchSize?: number;
  failFast?: boolean;
  dryRun?: boolean;
  /** v3 (default), or the deprecated v2 map: one identity kind per request, salt buckets instead of r. */
  api?: 'v3' | 'v2';
  /** --threads: worker threads that parse, prepare and encode CSV rows ('auto': the machine's default; absent or 0: the main thread; see pipeline/run/run-plan.ts). */
  threads?: number | 'auto';
  /** --keep, --drop-input-columns, --result-prefix, --emit-hash (the time format is output.timeFormat). */
  layout?: Omit<LayoutRequest, 'timeFormat'>;
  /** --phone-region: national phone numbers are read as this country's (default: the profile's phone_region). */
  phoneRegion?: PhoneRegion;
  /** --phone-region-col: each row's phones are read in the country this column names. */
  phoneRegionColumn?: string;
  /** --null-value: identifier cells so written are missing (besides empty cells and \N). */
  nullValues?: string[];
  connection: ConnectionFlags;
  output: OutputFlags;
}

/** The shared command deps (streams, env, clock, Ctrl-C signal) and, for tests, a client of their own. */
export type MapDeps = InputCommandDeps;

const parseConcurrency = wholeNumber('--concurrency', 1, 200);
const parseBatchSize = wholeNumber('--batch-size', 1, 5000);

export function registerMap(program: Command): void {
  const cmd = program
    .command('map')
    .summary('map emails, phones and hashes of CSV, JSONL or Parquet files to raw UIDs (POST /v3/identity/map)')
    .description(
      'Maps every row of CSV, JSONL or Parquet files (gzip too) to raw UIDs, written as CSV, TSV, JSONL or Parquet. Emails and phones are normalized and hashed here: only ' +
        'hashes are sent. Output: the input columns, then raw_uid, prev_raw_uid, refresh_from, status (mapped, optout, ' +
        'invalid, error, or missing for an empty cell) and reason per identifier column, in input order. Without column ' +
        'flags, the columns named like email, phone or email_hash are used. With --state FILE, a re-run sends only what ' +
        'is new, due or unfinished.\n\nExit codes: 0 done; 1 failed (the service, the network, a bad input file); ' +
        '2 usage or configuration; 3 some rows ended in error (run again to complete them); 4 credentials refused; ' +
        '9 records that could not be read were skipped (--on-bad-row skip; see --bad-rows); 130 interrupted.',
    )
    .argument(
      '[input...]',
      "CSV, JSONL or Parquet files (gzip too), directories of parts, or quoted patterns such as 'part-*.csv.gz', read as one run; - or nothing reads stdin",
    )
    .option('--state <file>', 'SQLite state file: answers fresh mappings without a request, makes re-runs resume')
    .option('--rejects <file>', 'also write the rows with an invalid, opted-out or failed identifier here')
    .option(
      '--concurrency <n>',
      `requests in flight at most (default 20; at most ${PUBLIC_MAX_CONCURRENCY} against the public service)`,
      parseConcurrency,
    )
    .option('--batch-size <n>', 'identifiers per request (default and maximum 5000)', parseBatchSize)
    .option(
      '--fail-fast',
      'stop at the first request that fails after its retries (exit 1) instead of marking its rows error',
    )
    .option('--dry-run', 'read, validate, hash and count what would be sent; send nothing, write no output')
    .option(
      '--api <version>',
      'v3 (default), or v2: the deprecated POST /v2/identity/map (one kind per request; output raw_uid, bucket_id, status, reason; its own --state file, kept fresh with uid2-batch buckets / remap-due)',
      parseApi,
    )
    .option(
      '--emit-hash',
      'also write the hash sent for each identifier (base64, the key of the state and the remap-due changes file; hex with --hash-encoding hex) and hash_type',
    )
    .option(
      '--keep <columns>',
      'write only these input columns (comma-separated; repeatable), e.g. --keep customer_id: raw emails and phones are not copied',
      collectRepeated,
    )
    .option('--drop-input-columns', 'write no input column (but those of --keep): only the result columns')
    .option(
      '--result-prefix <prefix>',
      "names of the result columns start with PREFIX_ (default: none for one identifier column, the column's name with spaces and punctuation as _ for several); with several: COLUMN=PREFIX, repeatable",
      collectRepeated,
    );
  addTableInputOptions(cmd);
  addPhoneRegionOption(cmd, true);
  addNullValueOption(cmd);
  addBadRowOptions(cmd);
  addConnectionOptions(cmd);
  addOutputOptions(cmd);
  addTimeFormatOption(cmd);
  addHashEncodingOption(cmd, 'the hashes of --emit-hash');
  addOutputDirOption(cmd);
  addThreadsOption(cmd, defaultMapThreads(), 'cores - 1, at most 3');
  cmd.action((input: string[] | undefined, opts: Record<string, unknown>) =>
    runInProcess((deps) => runMap(mapFlags(input, opts), deps)),
  );
}

function parseApi(value: string): 'v3' | 'v2' {
  const api = value.trim().toLowerCase();
  if (api !== 'v3' && api !== 'v2') throw new UserError(`--api must be v3 or v2 (got '${value}')`);
  return api;
}

/** The typed flags out of commander's options. */
export function mapFlags(input: string | readonly string[] | undefined, opts: Record<string, unknown>): MapFlags {
  const inputs = inputArgs(input);
  const str = (k: string) => (typeof opts[k] === 'string' ? (opts[k] as string) : undefined);
  const num = (k: string) => (typeof opts[k] === 'number' ? (opts[k] as number) : undefined);
  return {
    ...tableInputFlags(inputs[0] ?? '', opts),
    ...(inputs.length > 1 ? { inputs } : {}),
    ...badRowFlags(opts),
    ...(outputDirOf(opts) !== undefined ? { outputDir: outputDirOf(opts) } : {}),
    ...(str('state') !== undefined ? { state: str('state') } : {}),
    ...(str('rejects') !== undefined ? { rejects: str('rejects') } : {}),
    ...(num('concurrency') !== undefined ? { concurrency: num('concurrency') } : {}),
    ...(num('batchSize') !== undefined ? { batchSize: num('batchSize') } : {}),
    failFast: opts.failFast === true,
    dryRun: opts.dryRun === true,
    ...(opts.api === 'v2' ? { api: 'v2' as const } : {}),
    ...(phoneRegionFlagOf(opts) !== undefined ? { phoneRegion: phoneRegionFlagOf(opts) } : {}),
    ...(phoneRegionColumnFlagOf(opts) !== undefined ? { phoneRegionColumn: phoneRegionColumnFlagOf(opts) } : {}),
    ...(nullValuesOf(opts) !== undefined ? { nullValues: nullValuesOf(opts) } : {}),
    threads: threadsFlag(opts),
    layout: {
      ...(Array.isArray(opts.keep) ? { keep: opts.keep as string[] } : {}),
      ...(opts.dropInputColumns === true ? { dropInputColumns: true } : {}),
      ...(Array.isArray(opts.resultPrefix) ? { resultPrefixes: opts.resultPrefix as string[] } : {}),
      ...(opts.emitHash === true ? { emitHash: true } : {}),
    },
    connection: connectionFlags(opts),
    output: outputFlags(opts),
  };
}

/**
 * `uid2-batch map`: returns the exit code (0, 3 some rows error, 9 records that could not be read were skipped,
 * 130 interrupted); throws for the rest.
 */
export async function runMap(flags: MapFlags, deps: MapDeps): Promise<number> {
  if (flags.output.hashEncoding !== undefined && flags.layout?.emitHash !== true)
    throw new UserError(
      `--hash-encoding ${flags.output.hashEncoding} applies to the hashes --emit-hash writes: add --emit-hash, or drop --hash-encoding`,
    );
  const inputPaths = expandInputArgs(flags.inputs ?? [chooseInput(flags.input, deps.stdin)]);
  const partOutputs =
    flags.outputDir !== undefined
      ? partOutputPaths(flags.outputDir, inputPaths, flags.output.output !== undefined)
      : [];
  refuseOverlappingPaths(
    [...inputPaths.map((path) => ({ flag: 'the input', path })), { flag: '--state', path: flags.state }],
    [
      ...standardOutputs(flags.output),
      ...partOutputs.map((path) => ({ flag: '--output-dir', path })),
      { flag: '--rejects', path: flags.rejects },
      { flag: '--bad-rows', path: flags.badRows },
    ],
  );
  const skipping: BadRowFlags = {
    onBadRow: flags.onBadRow ?? 'fail',
    ...(flags.badRows !== undefined && flags.dryRun !== true ? { badRows: flags.badRows } : {}),
  };
  const badRows = await BadRowsOutput.open(skipping, sayTo(flags.output, deps));
  if (badRows === undefined) return mapParts(inputPaths, flags, deps, undefined);
  let code: number;
  try {
    code = await mapParts(inputPaths, flags, deps, badRows);
  } catch (err) {
    await badRows.abort();
    throw err;
  }
  if (code === EXIT.ok || code === EXIT.partial) await badRows.commit();
  else await badRows.abort();
  for (const line of badRows.closingLines()) sayTo(flags.output, deps)(line);
  return badRows.exitCode(code);
}

async function mapParts(
  inputPaths: string[],
  flags: MapFlags,
  deps: MapDeps,
  badRows: BadRowsOutput | undefined,
): Promise<number> {
  const startedMs = deps.now();
  const inputPath = inputPaths[0];
  const dryRun = flags.dryRun === true;
  // configuration first: a missing key should be said before a large file is opened
  const config = resolveFor(flags.connection, deps, { apiKey: !dryRun, clientSecret: !dryRun });
  const say = sayTo(flags.output, deps);
  // a deadline, not progress: said even with --quiet, so that cron mail carries it
  if (flags.api === 'v2') {
    deps.stderr.write(
      v2DeprecationWarning(
        'map --api v2 (POST /v2/identity/map)',
        'use v3: the same uid2-batch map command without --api v2 (uid2-batch migrate --state FILE converts a v2 state file)',
        startedMs,
      ),
    );
  }

  const plan = planThreads({
    command: 'map',
    threads: flags.threads,
    dryRun,
    outputDir: flags.outputDir !== undefined,
    outputFormat: flags.output.format,
  });
  const sourceOptions: Omit<OpenSourceOptions, 'path'> = {
    ...sourceOptionsOf(flags),
    ...(inputPath === '-' ? { stream: deps.stdin } : {}),
    ...(badRows !== undefined ? { onBadRecord: badRows.record } : {}),
    ...(deps.signal !== undefined ? { signal: deps.signal } : {}),
    ...(plan.readThread ? { readThread: true } : {}),
  };
  const opened = await openTableInputs(inputPaths, sourceOptions, plan.rowThreads);
  if (!plan.keepsYoungGenerationBounded(isPreparingSource(opened))) releaseYoungGeneration();
  return closeOnFailure(opened, () =>
    mapOpened(
      opened,
      { ...sourceOptions, path: inputPaths[0] },
      inputPaths,
      flags,
      config,
      plan,
      startedMs,
      deps,
      say,
      badRows,
    ),
  );
}

async function mapOpened(
  opened: TableInput,
  firstInput: OpenSourceOptions,
  inputPaths: string[],
  flags: MapFlags,
  config: ResolvedConfig,
  plan: ThreadPlan,
  startedMs: number,
  deps: MapDeps,
  say: (line: string) => void,
  badRows: BadRowsOutput | undefined,
): Promise<number> {
  const dryRun = flags.dryRun === true;
  // a one-column file of emails or phones without a header line is read as such (and said so)
  const source = inputPaths.length === 1 && mayBeHeaderless(flags, firstInput) ? readAsHeaderless(opened) : opened;
  for (const line of source.notes) say(line);
  if (source.header.length === 0) return emptyInput(source, flags, startedMs, deps, say);
  const identifiers = identifierColumns(source, flags, say);
  const regionIndex =
    flags.phoneRegionColumn === undefined
      ? undefined
      : phoneRegionColumnIndex(source.header, flags.phoneRegionColumn, identifiers, source.name);
  const columns = withNullMarkers(
    withPhoneRegion(identifiers, chooseRegion(flags.phoneRegion, config), regionIndex),
    flags.nullValues,
  );
  // a Parquet column of numbers or nested values holds no identifier as the service reads one
  requireTextColumns(
    source,
    columns.map((c) => c.name),
  );
  const layout = resultLayout(source, columns, flags);
  const rejectsFormat = flags.rejects === undefined ? undefined : formatOfExtension(flags.rejects);
  if (rejectsFormat !== undefined && rejectsFormat !== flags.output.format) {
    // the row threads encode an output row once, for both files: the rejects share the output's format
    say(`--rejects ${flags.rejects} is written as ${flags.output.format.toUpperCase()}, the format of the output`);
  }
  const concurrency = chooseConcurrency(flags.concurrency, config.env, say);

  let state: MapStateFile | undefined;
  if (flags.state !== undefined) {
    if (dryRun && !existsSync(flags.state))
      say(`--state ${flags.state} does not exist yet: nothing would be answered from it`);
    else
      state = openMapState(flags.state, {
        envFingerprint: envFingerprint(config),
        readonly: dryRun,
        api: flags.api ?? 'v3',
      });
  }
  try {
    if (dryRun && !isPieceSource(source)) return await dryRunReport(source, columns, flags, state, startedMs, deps);
    return await mapForReal(source, columns, layout, concurrency, config, plan, flags, state, startedMs, deps, badRows);
  } finally {
    await state?.close();
  }
}

/** A 0-byte input is an empty table, not a mistake: the output is empty too (no columns to name). */
async function emptyInput(
  source: TableInfo,
  flags: MapFlags,
  startedMs: number,
  deps: MapDeps,
  say: (line: string) => void,
): Promise<number> {
  say(`${source.name} is empty: nothing to map`);
  if (!flags.dryRun) {
    const sink = await openSink({
      path: flags.output.output,
      format: flags.output.format,
      ...sinkCompression(flags.output),
      header: [],
      stream: deps.stdout,
    });
    await sink.commit();
  }
  const summary = makeSummary({
    command: 'map',
    rows: 0,
    startedMs,
    endedMs: deps.now(),
    extra: { outcome: 'completed' },
  });
  if (!flags.output.quiet) printSummary(summary, deps.stderr);
  if (flags.output.summaryJson !== undefined) await writeSummaryJson(flags.output.summaryJson, summary);
  return EXIT.ok;
}

function chooseInput(input: string | undefined, stdin: { isTTY?: boolean }): string {
  if (input !== undefined && input !== '') return input;
  if (stdin.isTTY) {
    throw new UserError(
      'no input: give a CSV, JSONL or Parquet file (uid2-batch map FILE), or pipe rows in (... | uid2-batch map -)',
    );
  }
  return '-';
}

function identifierColumns(source: TableInput, flags: MapFlags, say: (line: string) => void): IdentifierColumn[] {
  const headerless = headerlessColumns(source);
  if (headerless !== undefined) return headerless;
  try {
    const resolved = resolveIdentifierColumns(source.header, flags, source.name);
    if (resolved.note !== undefined) say(resolved.note);
    return resolved.columns;
  } catch (err) {
    if (err instanceof ColumnError) throw new UserError(err.message);
    throw err;
  }
}

/** The output's layout as the flags ask for it; a column they name that the input lacks is a usage error. */
function resultLayout(source: TableInfo, columns: IdentifierColumn[], flags: MapFlags): ResultLayout {
  try {
    return resolveResultLayout(
      source.header,
      columns,
      { ...flags.layout, timeFormat: flags.output.timeFormat, hashEncoding: flags.output.hashEncoding },
      source.name,
    );
  } catch (err) {
    if (err instanceof ColumnError) throw new UserError(err.message);
    throw err;
  }
}

async function mapForReal(
  source: TableInput,
  columns: IdentifierColumn[],
  layout: ResultLayout,
  concurrency: number,
  resolved: ResolvedConfig,
  plan: ThreadPlan,
  flags: MapFlags,
  state: MapStateFile | undefined,
  startedMs: number,
  deps: MapDeps,
  badRows: BadRowsOutput | undefined,
): Promise<number> {
  const maxAttempts = resolved.maxAttempts ?? 6;
  const connection = await connectForMapping(serviceTargetOf(resolved), concurrency, {
    maxAttempts,
    ...(deps.client !== undefined ? { client: deps.client } : {}),
  });
  const { client, limiter } = connection;
  const api = flags.api ?? 'v3';
  const { header, types } = mapOutputColumns(source.header, columns, api, layout);
  let sink: TableSink | undefined;
  let rejects: TableSink | undefined;
  let progress: ProgressReporter | undefined;
  const threads = plan.engineThreads(isPieceSource(source));
  try {
    const sinkThreads = plan.encoderThreads(isPieceSource(source)) ?? 0;
    sink =
      flags.outputDir !== undefined
        ? partSinksFor(flags.outputDir, source, header, types)
        : await openSink({
            path: flags.output.output,
            format: flags.output.format,
            ...sinkCompression(flags.output),
            header,
            types,
            stream: deps.stdout,
            threads: sinkThreads,
          });
    if (flags.rejects !== undefined)
      rejects = await openSink({ path: flags.rejects, format: flags.output.format, header, types });
    progress = createProgress({
      label: 'map',
      stream: deps.stderr,
      quiet: flags.output.quiet === true,
      env: deps.env,
      dataOnStdout: flags.output.output === undefined,
      stdoutIsTTY: deps.stdout.isTTY === true,
    });
    const reporter = progress;
    state?.beginRun(runArgs(flags, source, columns, concurrency, resolved), Math.floor(startedMs / 1000));
    const result = await runMapJob({
      input: source,
      columns,
      client,
      limiter,
      output: { kind: 'table', sink, rejects, format: flags.output.format, header, types },
      api,
      layout,
      threads,
      state: state?.engineState,
      batchSize: flags.batchSize,
      failFast: flags.failFast === true,
      maxAttempts,
      signal: deps.signal,
      nowS: () => Math.floor(deps.now() / 1000),
      onProgress: (counts: MapRunCounts) =>
        reporter.update({
          done: counts.rowsDone,
          ...estimateTotal(source, counts),
          retries: client.stats.retries,
          http429: client.stats.http429,
        }),
    });
    progress.stop();
    const hint = phoneRegionHint(readsRegion(columns), result.counts);
    if (hint !== undefined) sayTo(flags.output, deps)(hint);
    const summary = mapSummary(result, client, source, startedMs, deps.now(), state);
    if (api === 'v2') summary.api = 'v2';
    state?.endRun(JSON.stringify(summary), exitCodeOf(result), Math.floor(deps.now() / 1000));
    return await finish(result, summary, {
      sink,
      rejects,
      badRows,
      flags,
      state,
      say: sayTo(flags.output, deps),
      deps,
    });
  } catch (err) {
    progress?.stop();
    await rejects?.abort();
    await sink?.abort();
    throw err;
  } finally {
    await connection.close();
  }
}

/** What the runs table records: how the run was asked for, never a credential. */
function runArgs(
  flags: MapFlags,
  source: TableInfo,
  columns: IdentifierColumn[],
  concurrency: number,
  config: ResolvedConfig,
): string {
  const region = columns.find((c) => c.phoneRegion !== undefined)?.phoneRegion;
  return JSON.stringify({
    input: source.name,
    output: flags.output.output ?? '-',
    format: flags.output.format,
    columns: columns.map((c) => ({ name: c.name, kind: c.kind })),
    env: config.env.name,
    base_url: config.isLocal ? 'embedded' : config.env.baseUrl,
    concurrency,
    batch_size: flags.batchSize ?? 5000,
    fail_fast: flags.failFast === true,
    ...(flags.api === 'v2' ? { api: 'v2' } : {}),
    ...(region !== undefined ? { phone_region: region } : {}),
    ...(flags.phoneRegionColumn !== undefined ? { phone_region_col: flags.phoneRegionColumn } : {}),
    ...(flags.nullValues !== undefined ? { null_values: flags.nullValues } : {}),
    ...(flags.output.timeFormat !== undefined ? { time_format: flags.output.timeFormat } : {}),
    ...(flags.layout?.emitHash === true ? { emit_hash: true } : {}),
    ...(flags.output.hashEncoding !== undefined ? { hash_encoding: flags.output.hashEncoding } : {}),
    ...(flags.layout?.keep !== undefined ? { keep: flags.layout.keep } : {}),
    ...(flags.layout?.dropInputColumns === true ? { drop_input_columns: true } : {}),
  });
}

interface Finish {
  sink: TableSink;
  rejects: TableSink | undefined;
  badRows: BadRowsOutput | undefined;
  flags: MapFlags;
  state: MapStateFile | undefined;
  say: (line: string) => void;
  deps: MapDeps;
}

/** Commits or abandons the output by outcome, reports, and picks the exit code. */
async function finish(result: MapRunResult, summary: RunSummary, f: Finish): Promise<number> {
  const { outcome } = result;
  // the run's files replace their targets together, and only when it completed
  if (outcome.kind === 'completed') await commitTogether([f.sink, f.rejects, f.badRows]);
  else {
    await f.rejects?.abort();
    await f.sink.abort();
    await f.badRows?.abort();
  }
  if (!f.flags.output.quiet) printSummary(summary, f.deps.stderr);
  if (f.flags.output.summaryJson !== undefined) await writeSummaryJson(f.flags.output.summaryJson, summary);
  const repeats = result.counts.repeatsSent;
  if (repeats > 0) {
    f.say(
      `about ${formatCount(repeats)} repeated identifier(s) were sent again: they came more than ` +
        `${formatCount(REMEMBERED_IDENTIFIERS)} distinct identifiers after their first one, more than a run without ` +
        'a state file remembers; with --state FILE each is sent once',
    );
  }
  const notWritten =
    f.flags.output.output !== undefined
      ? `${f.flags.output.output} was not written`
      : f.flags.outputDir !== undefined
        ? `no output in ${f.flags.outputDir} was written`
        : 'the rows on stdout are incomplete';
  switch (outcome.kind) {
    case 'completed': {
      const errors = result.counts.status.error;
      if (errors === 0) return EXIT.ok;
      f.say(
        `${formatCount(errors)} identifier(s) ended in error (see the reason column${f.flags.rejects ? ` and ${f.flags.rejects}` : ''}); ` +
          (f.state
            ? 're-run the same command to retry only those'
            : 'add --state FILE to retry only those on a re-run'),
      );
      return EXIT.partial;
    }
    case 'interrupted':
      f.say(
        `interrupted: ${notWritten}; ` +
          (f.state
            ? `${formatCount(result.counts.batchesCommitted)} answered batch(es) are saved in ${f.flags.state}: re-run the same command to resume`
            : 'nothing was saved (use --state FILE to make a re-run resume)'),
      );
      return EXIT.interrupted;
    case 'auth-refused':
      throw outcome.error;
    case 'failed': {
      const error = outcome.error;
      const saved = f.state ? `; answered batches are saved in ${f.flags.state}, a re-run resumes` : '';
      if (!KNOWN_FAILURES.has(error.name)) throw error;
      const lead =
        f.flags.failFast && !LOCAL_FAILURES.has(error.name)
          ? 'stopped at the first failed request (--fail-fast): '
          : '';
      throw new UserError(`${lead}${error.message}; ${notWritten}${saved}`, EXIT.failed);
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
  source: TableSource,
  columns: IdentifierColumn[],
  flags: MapFlags,
  state: MapStateFile | undefined,
  startedMs: number,
  deps: MapDeps,
): Promise<number> {
  const engine = new MapEngine({
    columns,
    dryRun: true,
    ...(state !== undefined ? { state: state.engineState } : {}),
    ...(flags.batchSize !== undefined ? { batchSize: flags.batchSize } : {}),
    ...(deps.signal !== undefined ? { signal: deps.signal } : {}),
    nowS: () => Math.floor(deps.now() / 1000),
  });
  const result = await engine.run(source.rows());
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
    `  ${formatCount(c.batches)} request(s) would be sent (${formatCount(c.itemsInBatches)} identifiers, up to ${formatCount(flags.batchSize ?? 5000)} per request)`,
  ];
  if (!flags.output.quiet) deps.stderr.write(`${lines.join('\n')}\n`);
  const hint = phoneRegionHint(readsRegion(columns), c);
  if (hint !== undefined) sayTo(flags.output, deps)(hint);
  if (flags.output.summaryJson !== undefined) {
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
    await writeSummaryJson(flags.output.summaryJson, summary);
  }
  return result.outcome.kind === 'interrupted' ? EXIT.interrupted : EXIT.ok;
}
