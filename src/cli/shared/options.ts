import { Option, type Command } from 'commander';
import { DEFAULT_ENV, environmentNames, type ConnectionFlags } from '../../config/index.js';
import { OUTPUT_FORMAT_CHOICES, outputFormatOf } from '../../pipeline/io/format-names.js';
import type { OutputFlags } from '../../pipeline/run/output-options.js';
import { HASH_ENCODINGS } from '../../pipeline/io/output/hash-cells.js';
import { TIME_FORMATS } from '../../pipeline/io/typed-cells.js';
import { UserError } from './exit-codes.js';

/**
 * A commander argument parser for a whole number in [min, max]. It throws a UserError (not commander's
 * InvalidArgumentError) so the user reads exactly one line: "--concurrency must be a whole number from 1 to 20".
 */
export function wholeNumber(flag: string, min: number, max: number): (value: string) => number {
  return (value: string) => {
    const n = /^\s*\d+\s*$/.test(value) ? Number(value) : Number.NaN;
    if (!Number.isSafeInteger(n) || n < min || n > max) {
      throw new UserError(`${flag} must be a whole number from ${min} to ${max} (got '${value}')`);
    }
    return n;
  };
}

/** A parser for a non-negative decimal number of seconds or the like, within [min, max]. */
export function decimalNumber(flag: string, min: number, max: number): (value: string) => number {
  return (value: string) => {
    const n = /^\s*\d+(\.\d+)?\s*$/.test(value) ? Number(value) : Number.NaN;
    if (!Number.isFinite(n) || n < min || n > max) {
      throw new UserError(`${flag} must be a number from ${min} to ${max} (got '${value}')`);
    }
    return n;
  };
}

export const parseTimeoutMs = wholeNumber('--timeout-ms', 100, 600_000);
export const parseMaxAttempts = wholeNumber('--max-attempts', 1, 20);
/** The public service allows 20 requests in flight; the command caps private ones itself if it wants. */
export const parseConcurrency = wholeNumber('--concurrency', 1, 20);

/**
 * --env, --base-url, --scope, --profile, --config, --api-key-file, --client-secret-file, --insecure-http,
 * --timeout-ms, --max-attempts. No defaults are set here: resolveConfig must see what the user left out,
 * so that UID2_* variables and profiles can fill it (flag > variable > profile).
 */
export function addConnectionOptions(cmd: Command): Command {
  return cmd
    .option('--env <name>', `environment: ${environmentNames().join(', ')} (default ${DEFAULT_ENV}; or UID2_ENV)`)
    .option('--base-url <url>', "service URL instead of the environment's, e.g. a private operator (or UID2_BASE_URL)")
    .option('--scope <scope>', 'identity scope (UID2 or EUID) of a --base-url this tool does not know')
    .option('--profile <name>', 'profile of the config file to use (or UID2_PROFILE)')
    .option('--config <file>', 'config file with profiles (or UID2_CONFIG; default ~/.config/uid2-batch/config.json)')
    .option('--api-key-file <file>', 'file holding the API key (or UID2_API_KEY / UID2_API_KEY_FILE)')
    .option(
      '--client-secret-file <file>',
      'file holding the client secret (or UID2_CLIENT_SECRET / UID2_CLIENT_SECRET_FILE)',
    )
    .option('--insecure-http', 'allow a plain http:// base URL to another machine (sends the API key unencrypted)')
    .option(
      '--proxy <url>',
      'proxy for every request to the service, or "none" (default: HTTPS_PROXY / HTTP_PROXY, with NO_PROXY)',
    )
    .option(
      '--timeout-ms <ms>',
      'time limit on each request attempt as a whole (connect to last byte of the answer), in milliseconds',
      parseTimeoutMs,
    )
    .option(
      '--max-attempts <n>',
      'attempts per request, including the first (retries on 429, 5xx, network errors)',
      parseMaxAttempts,
    );
}

export type { OutputCompression, OutputFlags, OutputFormat } from '../../pipeline/run/output-options.js';
export { sinkCompression } from '../../pipeline/run/output-options.js';

/**
 * -o/--output, --format csv|tsv|jsonl|parquet, --compress gzip|none, --summary-json FILE, --quiet. --format and
 * --compress have no default here: without them the name of -o chooses (outputFlags), as the input's name
 * chooses how it is read.
 */
export function addOutputOptions(cmd: Command): Command {
  return cmd
    .option(
      '-o, --output <file>',
      'write rows to this file (written to a temp file, renamed at the end); default stdout',
    )
    .addOption(
      new Option(
        '--format <format>',
        'output format (default: by the extension of -o: .csv, .tsv, .jsonl/.ndjson, .parquet, also under .gz; else csv)',
      ).choices([...OUTPUT_FORMAT_CHOICES]),
    )
    .addOption(
      new Option(
        '--compress <method>',
        'gzip the output or not (default: gzip when -o ends in .gz); Parquet compresses its own pages',
      ).choices(['gzip', 'none']),
    )
    .option(
      '--summary-json <file>',
      'also write the run summary as JSON to this file (or s3://BUCKET/KEY where -o may be one)',
    )
    .option('-q, --quiet', 'no progress and no summary on stderr (errors still print)');
}

/** --metrics-file FILE, for the batch commands: the run's counters for node_exporter's textfile collector. */
export function addMetricsFileOption(cmd: Command): Command {
  return cmd.option(
    '--metrics-file <file>',
    "write the run's counters, exit code and end time in the Prometheus text format (node_exporter's textfile collector), also when the run fails; a file, or s3://BUCKET/KEY where -o may be one",
  );
}

/** --time-format unix|iso, for the commands whose output has refresh times or opt-out times. */
export function addTimeFormatOption(cmd: Command): Command {
  return cmd.addOption(
    new Option(
      '--time-format <format>',
      'how refresh_from and opt-out times are written: unix (seconds, default) or iso (ISO 8601 UTC, e.g. 2027-01-05T00:00:00Z)',
    ).choices([...TIME_FORMATS]),
  );
}

/** --hash-encoding base64|hex, for the commands whose output has hashes. */
export function hashEncodingOption(which = 'the hashes written'): Option {
  return new Option(
    '--hash-encoding <encoding>',
    `how ${which} are written: base64 (44 characters, as sent and stored; default) or hex (64 lowercase characters, as a warehouse's sha2() gives)`,
  ).choices([...HASH_ENCODINGS]);
}

export function addHashEncodingOption(cmd: Command, which?: string): Command {
  return cmd.addOption(hashEncodingOption(which));
}

const parseLockWait = decimalNumber('--wait', 0, 86_400);

/** --wait SECONDS, for the commands that take the state file's lock: how long to wait for a run that holds it. */
export function lockWaitOption(what = 'the state file'): Option {
  return new Option(
    '--wait <seconds>',
    `wait up to this long for a run that holds ${what} (default 0: fail at once, exit 2)`,
  ).argParser(parseLockWait);
}

export function addLockWaitOption(cmd: Command, what?: string): Command {
  return cmd.addOption(lockWaitOption(what));
}

/** Typed reads of commander's untyped opts(): a string or number option, or undefined when absent. */
export function optionReaders(opts: Record<string, unknown>): {
  str(key: string): string | undefined;
  num(key: string): number | undefined;
} {
  return {
    str: (k) => (typeof opts[k] === 'string' ? (opts[k] as string) : undefined),
    num: (k) => (typeof opts[k] === 'number' ? (opts[k] as number) : undefined),
  };
}

/** The connection flags out of a command's parsed options, typed (commander's opts() is untyped). */
export function connectionFlags(opts: Record<string, unknown>): ConnectionFlags {
  const { str, num } = optionReaders(opts);
  const flags: ConnectionFlags = {
    env: str('env'),
    baseUrl: str('baseUrl'),
    scope: str('scope'),
    profile: str('profile'),
    config: str('config'),
    apiKeyFile: str('apiKeyFile'),
    clientSecretFile: str('clientSecretFile'),
    insecureHttp: opts.insecureHttp === true,
    proxy: str('proxy'),
    timeoutMs: num('timeoutMs'),
    maxAttempts: num('maxAttempts'),
  };
  for (const key of Object.keys(flags) as (keyof ConnectionFlags)[]) if (flags[key] === undefined) delete flags[key];
  return flags;
}

/**
 * The output flags out of a command's parsed options, typed. A Parquet output they cannot give (to stdout,
 * gzipped, or named .gz) is a usage error here, before any input is read.
 */
export function outputFlags(opts: Record<string, unknown>): OutputFlags {
  const flags = outputFlagsAsGiven(opts);
  if (flags.format === 'parquet') refuseParquetOutput(flags);
  return flags;
}

function refuseParquetOutput(flags: OutputFlags): void {
  if (flags.output === undefined) {
    throw new UserError(
      'Parquet cannot be written to stdout (its index is written at the end of the file): give a file name with -o, e.g. -o out.parquet',
    );
  }
  if (flags.compress === 'gzip') {
    throw new UserError(
      '--compress gzip does not apply to Parquet (it compresses its own pages): drop --compress, or write CSV or JSONL',
    );
  }
  if (flags.compress === undefined && /\.gz$/i.test(flags.output)) {
    throw new UserError(
      `-o ${flags.output}: a Parquet file is not gzipped as a whole (it compresses its own pages): name it .parquet, or write CSV or JSONL to a .gz name`,
    );
  }
}

function outputFlagsAsGiven(opts: Record<string, unknown>): OutputFlags {
  return {
    ...(typeof opts.output === 'string' && opts.output !== '-' ? { output: opts.output } : {}),
    format: outputFormatOf(
      typeof opts.output === 'string' ? opts.output : undefined,
      typeof opts.format === 'string' ? opts.format : undefined,
    ),
    ...(typeof opts.summaryJson === 'string' ? { summaryJson: opts.summaryJson } : {}),
    ...(typeof opts.metricsFile === 'string' ? { metricsFile: opts.metricsFile } : {}),
    quiet: opts.quiet === true,
    ...(opts.timeFormat === 'iso' || opts.timeFormat === 'unix' ? { timeFormat: opts.timeFormat } : {}),
    ...(opts.hashEncoding === 'base64' || opts.hashEncoding === 'hex' ? { hashEncoding: opts.hashEncoding } : {}),
    ...(opts.compress === 'gzip' || opts.compress === 'none' ? { compress: opts.compress } : {}),
  };
}
