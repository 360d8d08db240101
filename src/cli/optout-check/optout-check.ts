import type { Command } from 'commander';
import { describeState } from '../../pipeline/jobs/state-where.js';
import type { Shard } from '../../pipeline/shard/shard-spec.js';
import { addShardOption, shardFlag } from '../shared/shard-option.js';
import type { ConnectionFlags } from '../../config/index.js';
import { runOptoutCheckJob } from '../../pipeline/jobs/optout-check-job.js';
import type { BadRowFlags } from '../../pipeline/run/bad-rows-output.js';
import { addBadRowOptions, badRowFlags } from '../shared/bad-rows.js';
import {
  resolveFor,
  runDepsOf,
  runInProcess,
  serviceTargetOf,
  type InputCommandDeps,
} from '../shared/command-context.js';
import { UserError } from '../shared/exit-codes.js';
import {
  addInputFormatOptions,
  expandInputArgs,
  inputArgs,
  inputFormatFlags,
  sourceOptionsOf,
  type InputFlags,
} from '../shared/input-options.js';
import {
  addConnectionOptions,
  addMetricsFileOption,
  addOutputOptions,
  addHashEncodingOption,
  addLockWaitOption,
  addTimeFormatOption,
  connectionFlags,
  decimalNumber,
  optionReaders,
  outputFlags,
  wholeNumber,
  type OutputFlags,
} from '../shared/options.js';
import { addS3EndpointOption } from '../shared/s3-endpoint-option.js';
import { refuseOverlappingPaths, standardOutputs } from '../shared/output-paths.js';
import { collectRepeated } from '../shared/repeated-flags.js';

export interface OptoutCheckFlags extends Partial<BadRowFlags> {
  /** File, '-' for stdin, or undefined (stdin when it is not a terminal, unless --state). */
  input?: string;
  /** Several inputs, directories or patterns, read as one run (see pipeline/io/input-parts.ts); `input` is the first. */
  inputs?: string[];
  /** --col, repeatable: every column named is checked. */
  cols?: string[];
  /** How the file is read: format, delimiter, encoding, header (as for map and hash). */
  reading: Omit<InputFlags, 'input'>;
  onlyOptedOut: boolean;
  state?: string;
  sweepFraction?: number;
  privateOperator: boolean;
  concurrency?: number;
  /** --wait with --state: seconds to wait for another run's lock on the state file (absent: fail at once). */
  wait?: number;
  /** --shard K/N with --state: check only the entries whose key falls to runner K. */
  shard?: Shard;
  connection: ConnectionFlags;
  output: OutputFlags;
}

/** What optout-check touches besides its files: injected, so tests run the command without a process. */
export type OptoutCheckDeps = InputCommandDeps;

const parseConcurrency = wholeNumber('--concurrency', 1, 100);
const parseFraction = decimalNumber('--sweep-fraction', 0, 1);

export function registerOptoutCheck(program: Command): void {
  const cmd = program
    .command('optout-check')
    .summary('which raw UIDs have opted out (POST /v2/optout/status), from a file or the state file')
    .description(
      [
        'Asks the service which raw UIDs have opted out. Input: a CSV, JSONL or Parquet column of raw UIDs (--col, or the one column named like raw_uid, advertising_id, uid or raw_uid2), or --state FILE to check the raw UIDs and previous raw UIDs stored there; opted-out entries are then tombstoned and each check time is recorded.',
        "Requests go one at a time on one connection, the service's rule for this endpoint, unless --private-operator.",
        'Re-mapping alone sees an opt-out only when the entry comes due, up to a year later. A nightly `optout-check --state s.db --sweep-fraction 0.05` checks 5% of the entries, going on from where the last night stopped, so every entry is checked every 20 days.',
        'Output: CSV, TSV, JSONL or Parquet, by the name of -o or --format.',
        'Exit codes: 0 done (opted-out raw UIDs are data); 1 failed (the service, the network, a bad input file); 2 usage, or another run is using the state file; 3 some raw UIDs could not be checked (run again); 4 credentials refused; 9 records that could not be read were skipped (--on-bad-row skip; see --bad-rows); 130 interrupted.',
      ].join('\n\n'),
    )
    .argument(
      '[input...]',
      "CSV, JSONL or Parquet files with a column of raw UIDs, directories of parts, or quoted patterns such as 'part-*.csv.gz', read as one run; - reads stdin",
    )
    .option(
      '--col <name>',
      'a column of raw UIDs (repeatable: every column named is checked; default: the one named like raw_uid, advertising_id, uid, raw_uid2)',
      collectRepeated,
    )
    .option('--only-opted-out', 'write only the opted-out rows')
    .option(
      '--state <file>',
      'check the raw UIDs stored in this state (a file or a postgres:// URL) instead of an input file; tombstone the opted-out entries',
    )
    .option(
      '--sweep-fraction <f>',
      'with --state: check only this fraction of the entries, from where the last sweep stopped (e.g. 0.05)',
      parseFraction,
    )
    .option('--private-operator', 'the service is a private operator: batches may be sent in parallel')
    .option('--concurrency <n>', 'with --private-operator: requests in flight at most (default 4)', parseConcurrency);
  addLockWaitOption(cmd, 'the --state file (a remap-due, a map --state) or its share of a database');
  addS3EndpointOption(cmd, 's3:// inputs, -o and --bad-rows');
  addShardOption(
    cmd,
    "with --state, check only the entries whose key falls to this runner (by a hash of the key); all runners use one N, and a failed runner's opt-outs come with the next run of its K/N",
  );
  addInputFormatOptions(cmd);
  addBadRowOptions(cmd);
  addConnectionOptions(cmd);
  addOutputOptions(cmd);
  addMetricsFileOption(cmd);
  addTimeFormatOption(cmd);
  addHashEncodingOption(cmd, 'the hashes of --state rows');
  cmd.action((input: string[] | undefined, opts: Record<string, unknown>) =>
    runInProcess((deps) => runOptoutCheck(optoutCheckFlags(input, opts), deps)),
  );
}

export function optoutCheckFlags(
  input: string | readonly string[] | undefined,
  opts: Record<string, unknown>,
): OptoutCheckFlags {
  const { str, num } = optionReaders(opts);
  const inputs = inputArgs(input);
  return {
    ...(inputs.length > 0 ? { input: inputs[0] } : {}),
    ...(inputs.length > 1 ? { inputs } : {}),
    ...(Array.isArray(opts.col) && opts.col.length > 0 ? { cols: opts.col as string[] } : {}),
    reading: inputFormatFlags(opts),
    ...badRowFlags(opts),
    onlyOptedOut: opts.onlyOptedOut === true,
    ...(str('state') !== undefined ? { state: str('state') } : {}),
    ...(num('sweepFraction') !== undefined ? { sweepFraction: num('sweepFraction') } : {}),
    privateOperator: opts.privateOperator === true,
    ...(num('concurrency') !== undefined ? { concurrency: num('concurrency') } : {}),
    ...(num('wait') !== undefined ? { wait: num('wait') } : {}),
    ...(shardFlag(opts) !== undefined ? { shard: shardFlag(opts) } : {}),
    connection: connectionFlags(opts),
    output: outputFlags(opts),
  };
}

/** Checks the flags that only make sense together, before anything is opened. */
function checkCombinations(flags: OptoutCheckFlags): void {
  if (flags.state !== undefined && flags.input !== undefined) {
    throw new UserError(
      `give either an input file or --state FILE, not both (got '${flags.input}' and --state ${describeState(flags.state)})`,
    );
  }
  if (flags.sweepFraction !== undefined && flags.state === undefined) {
    throw new UserError('--sweep-fraction works on a state file: add --state FILE');
  }
  if (flags.output.hashEncoding !== undefined && flags.state === undefined) {
    throw new UserError(
      `--hash-encoding ${flags.output.hashEncoding} applies to the hashes of --state rows (a file of raw UIDs has none): add --state FILE, or drop it`,
    );
  }
  if (flags.wait !== undefined && flags.state === undefined)
    throw new UserError('--wait is for the lock of a state file: add --state FILE, or drop --wait');
  if (flags.shard !== undefined && flags.state === undefined)
    throw new UserError('--shard shares out the entries of a state file: add --state FILE, or drop --shard');
  if (flags.shard !== undefined && flags.sweepFraction !== undefined)
    throw new UserError(
      '--shard with --sweep-fraction: the runners would each move the one sweep position; sweep all entries with --shard, or a fraction without it',
    );
  if (flags.sweepFraction === 0)
    throw new UserError('--sweep-fraction must be above 0 (e.g. 0.05 checks 5% of the entries per run)');
  if (flags.concurrency !== undefined && flags.concurrency > 1 && !flags.privateOperator) {
    throw new UserError(
      '--concurrency needs --private-operator: the public service takes opt-out checks one request at a time on one connection',
    );
  }
}

/** `uid2-batch optout-check`: returns the exit code (0, 3 some batches failed, 130 interrupted); throws for the rest. */
export async function runOptoutCheck(flags: OptoutCheckFlags, deps: OptoutCheckDeps): Promise<number> {
  checkCombinations(flags);
  const inputPaths =
    flags.state === undefined ? expandInputArgs(flags.inputs ?? [chooseInput(flags.input, deps.stdin)], true) : [];
  refuseOverlappingPaths(
    [...inputPaths.map((path) => ({ flag: 'the input', path })), { flag: '--state', path: flags.state }],
    [...standardOutputs(flags.output), { flag: '--bad-rows', path: flags.badRows }],
    true,
  );
  const startedMs = deps.now();
  // configuration first: a missing key should be said before a large file is opened
  const config = resolveFor(flags.connection, deps, { apiKey: true, clientSecret: true });
  return runOptoutCheckJob(
    {
      inputs: inputPaths,
      cols: flags.cols,
      reading: sourceOptionsOf(flags.reading),
      onBadRow: flags.onBadRow,
      badRows: flags.badRows,
      onlyOptedOut: flags.onlyOptedOut,
      state: flags.state,
      sweepFraction: flags.sweepFraction,
      privateOperator: flags.privateOperator,
      concurrency: flags.concurrency,
      wait: flags.wait,
      shard: flags.shard,
      output: flags.output,
    },
    serviceTargetOf(config),
    runDepsOf(deps),
    startedMs,
  );
}

function chooseInput(input: string | undefined, stdin: { isTTY?: boolean }): string {
  if (input !== undefined && input !== '') return input;
  if (stdin.isTTY) {
    throw new UserError(
      'no input: give a CSV, JSONL or Parquet file of raw UIDs (uid2-batch optout-check FILE), pipe one in (... | uid2-batch optout-check -), or use --state FILE',
    );
  }
  return '-';
}
