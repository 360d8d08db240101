import type { Command } from 'commander';
import type { ConnectionFlags } from '../../config/index.js';
import { type MapJobDeps, runMapFilesJob } from '../../pipeline/jobs/map-files-job.js';
import { isS3Url } from '../../pipeline/io/s3/s3-url.js';
import type { ColumnFlags } from '../../pipeline/map/identifier-columns.js';
import type { LayoutRequest } from '../../pipeline/map/result-layout.js';
import type { BadRowFlags } from '../../pipeline/run/bad-rows-output.js';
import { PUBLIC_MAX_CONCURRENCY } from '../../pipeline/run/connection.js';
import { defaultMapThreads } from '../../pipeline/run/run-plan.js';
import type { PhoneRegion } from '../../identity/index.js';
import { addBadRowOptions, badRowFlags } from '../shared/bad-rows.js';
import {
  resolveFor,
  stateFor,
  runDepsOf,
  runInProcess,
  serviceTargetOf,
  type InputCommandDeps,
} from '../shared/command-context.js';
import { EXIT, UserError } from '../shared/exit-codes.js';
import {
  addTableInputOptions,
  expandInputArgs,
  inputArgs,
  sourceOptionsOf,
  tableInputFlags,
  type InputFlags,
} from '../shared/input-options.js';
import { addNullValueOption, nullValuesOf } from '../shared/null-value-option.js';
import {
  addConnectionOptions,
  addMetricsFileOption,
  addOutputOptions,
  addHashEncodingOption,
  addTimeFormatOption,
  connectionFlags,
  outputFlags,
  wholeNumber,
  type OutputFlags,
} from '../shared/options.js';
import { addOutputDirOption, outputDirOf, partOutputPaths } from '../shared/output-dir.js';
import { refuseOverlappingPaths, standardOutputs } from '../shared/output-paths.js';
import { addPhoneRegionOption, phoneRegionColumnFlagOf, phoneRegionFlagOf } from '../shared/phone-region-option.js';
import { collectRepeated } from '../shared/repeated-flags.js';
import { addThreadsOption, threadsFlag } from '../shared/threads-option.js';
import type { Shard } from '../../pipeline/shard/shard-spec.js';
import { addS3EndpointOption } from '../shared/s3-endpoint-option.js';
import { addShardOption, shardFlag } from '../shared/shard-option.js';

/** Input and identifier columns as every table-reading command takes them, plus what map adds. */
export interface MapFlags extends ColumnFlags, Partial<BadRowFlags> {
  /** File, '-' for stdin, or undefined (stdin when it is not a terminal). */
  input?: string;
  /** Several inputs, directories or patterns, read as one run (see pipeline/io/input-parts.ts); `input` is the first. */
  inputs?: string[];
  /** One output per input in this directory, named as the input (instead of -o). */
  outputDir?: string;
  /** --shard K/N: map runner K's share of the input (docs/deploy.md). */
  shard?: Shard;
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

/**
 * The shared command deps (streams, env, clock, Ctrl-C signal) and, for tests, a client and openers of the input,
 * outputs and state of their own.
 */
export type MapDeps = InputCommandDeps & Pick<MapJobDeps, 'open'>;

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
    .option(
      '--state <file>',
      "state file, or postgres:// URL (default: UID2_BATCH_STATE, or the profile's state): answers fresh mappings without a request, makes re-runs resume",
    )
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
  addS3EndpointOption(cmd, 's3:// inputs, -o, --rejects and --bad-rows');
  addTableInputOptions(cmd);
  addPhoneRegionOption(cmd, true);
  addNullValueOption(cmd);
  addBadRowOptions(cmd);
  addConnectionOptions(cmd);
  addOutputOptions(cmd);
  addMetricsFileOption(cmd);
  addTimeFormatOption(cmd);
  addHashEncodingOption(cmd, 'the hashes of --emit-hash');
  addOutputDirOption(cmd);
  addThreadsOption(cmd, defaultMapThreads(), 'cores - 1, at most 3');
  addShardOption(
    cmd,
    'map only its share of the input (whole parts, or a range of one file or S3 object); the N outputs put end to end in K order are the one-runner output',
  );
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
    ...(shardFlag(opts) !== undefined ? { shard: shardFlag(opts) } : {}),
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
export async function runMap(given: MapFlags, deps: MapDeps): Promise<number> {
  const state = stateFor(given.connection, given.state, deps);
  const flags: MapFlags = state === undefined ? given : { ...given, state };
  if (flags.output.hashEncoding !== undefined && flags.layout?.emitHash !== true)
    throw new UserError(
      `--hash-encoding ${flags.output.hashEncoding} applies to the hashes --emit-hash writes: add --emit-hash, or drop --hash-encoding`,
    );
  if (flags.shard !== undefined) refuseShardWith(flags);
  const named = flags.inputs ?? [chooseInput(flags.input, deps.stdin)];
  const inputPaths = expandInputArgs(named, true);
  const s3Input = inputPaths.find((path) => isS3Url(path));
  if (flags.outputDir !== undefined && s3Input !== undefined)
    throw new UserError(
      `--output-dir names its outputs after local inputs: '${s3Input}' is in S3; use -o s3://BUCKET/KEY or -o FILE instead`,
      EXIT.usage,
    );
  // with several parts each runner writes its own parts' outputs; one file's output would be every runner's
  if (flags.shard !== undefined && flags.outputDir !== undefined && inputPaths.length < 2)
    throw new UserError(
      '--shard with --output-dir needs several input parts (each runner writes its own parts there); for one file use -o with a file per runner (e.g. out-2.csv)',
    );
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
    true,
  );
  const dryRun = flags.dryRun === true;
  // configuration first: a missing key should be said before a large file is opened
  const config = resolveFor(flags.connection, deps, { apiKey: !dryRun, clientSecret: !dryRun });
  const target = serviceTargetOf(config);
  const { input, inputs, inputFormat, delimiter, encoding, header, outputDir, connection, ...asked } = flags;
  return runMapFilesJob(
    {
      ...asked,
      inputs: inputPaths,
      reading: sourceOptionsOf({ inputFormat, delimiter, encoding, header }),
      ...(outputDir !== undefined ? { outputDir: { dir: outputDir, paths: partOutputs } } : {}),
      ...(config.phoneRegion !== undefined ? { profilePhoneRegion: config.phoneRegion } : {}),
    },
    target,
    runDepsOf(deps),
  );
}

/** An output that cannot be put end to end: a Parquet file has one footer for its rows. */
function refuseShardWith(flags: MapFlags): void {
  if (flags.output.format === 'parquet')
    throw new UserError(
      "--shard with a Parquet output: the runners' Parquet files could not be put end to end; write CSV or JSONL (-o out.csv), or map the parts in separate runs",
    );
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
