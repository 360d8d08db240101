import { Option, type Command } from 'commander';
import type { ColumnFlags, ColumnKind } from '../../pipeline/map/identifier-columns.js';
import { expandInputs, InputPartsError } from '../../pipeline/io/input-parts.js';
import { isS3Url } from '../../pipeline/io/s3/s3-url.js';
import type { InputReading } from '../../pipeline/jobs/run-input.js';
import { EXIT, UserError } from './exit-codes.js';
import { collectRepeated } from './repeated-flags.js';
import { quoted } from './user-values.js';

/** How the input is read; shared by every command that reads a table (`map`, `hash`...). */
export interface InputFlags {
  /** File path, or '-' for stdin. */
  input: string;
  inputFormat?: 'csv' | 'jsonl' | 'parquet' | 'auto';
  delimiter?: string;
  encoding?: 'utf8' | 'latin1';
  /** false: the first line is data; columns are named col1..colN. */
  header?: boolean;
}

/** Repeatable flags; no default, so the help does not print an empty list. */
const collect = collectRepeated;

/** The input and identifier column options shared by the commands that read a table of identifiers. */
export function addTableInputOptions(cmd: Command): Command {
  cmd
    .option('--email-col <name>', 'column of raw emails (repeatable)', collect)
    .option(
      '--phone-col <name>',
      'column of phones: E.164 (+14155550100), or national and formatted ones with --phone-region (repeatable)',
      collect,
    )
    .option('--email-hash-col <name>', 'column of email SHA-256 hashes, base64 or hex (repeatable)', collect)
    .option('--phone-hash-col <name>', 'column of phone SHA-256 hashes, base64 or hex (repeatable)', collect)
    .option('--col <name>', 'an identifier column whose kind --type gives (default: detect each cell)')
    .addOption(
      new Option('--type <kind>', 'what --col holds').choices(['auto', 'email', 'phone', 'email_hash', 'phone_hash']),
    );
  return addInputFormatOptions(cmd);
}

/** How a table is read (format, delimiter, encoding, header): every command that reads a file takes these. */
export function addInputFormatOptions(cmd: Command): Command {
  return cmd
    .addOption(
      new Option(
        '--input-format <format>',
        'input format (auto: by the name: .jsonl/.ndjson are JSON Lines, .parquet Parquet, else CSV; gzip is recognised by its bytes)',
      )
        .choices(['auto', 'csv', 'jsonl', 'parquet'])
        .default('auto'),
    )
    .option('--delimiter <char>', 'CSV field delimiter, e.g. ";" or tab (default ",")', delimiterFlag)
    .addOption(new Option('--encoding <encoding>', 'input text encoding').choices(['utf8', 'latin1']).default('utf8'))
    .option('--no-header', 'the first line is data; columns are named col1, col2, ...');
}

/**
 * `--delimiter`: checked while the flags are read, so that `--delimiter ';;'` is a usage error (exit 2) before
 * any file is opened. One character other than a quote or a line break; `tab` or `\t` for a tab, which is
 * what the readers are handed.
 */
export function delimiterFlag(value: string): string {
  if (value === '\\t' || value.toLowerCase() === 'tab') return '\t';
  if ([...value].length === 1 && value !== '"' && value !== '\n' && value !== '\r') return value;
  throw new UserError(
    `--delimiter must be one character other than a quote or a line break (got ${quoted(value)}): e.g. --delimiter ";" or --delimiter tab`,
  );
}

/** The input format flags out of commander's untyped options. */
export function inputFormatFlags(opts: Record<string, unknown>): Omit<InputFlags, 'input'> {
  const str = (k: string) => (typeof opts[k] === 'string' ? (opts[k] as string) : undefined);
  const flags: Omit<InputFlags, 'input'> = { header: opts.header !== false };
  const inputFormat = str('inputFormat');
  if (inputFormat !== undefined) flags.inputFormat = inputFormat as InputFlags['inputFormat'];
  const delimiter = str('delimiter');
  if (delimiter !== undefined) flags.delimiter = delimiter;
  const encoding = str('encoding');
  if (encoding !== undefined) flags.encoding = encoding as InputFlags['encoding'];
  return flags;
}

/** How these flags ask the input to be read; what they leave out, the run's settling of its input fills in. */
export function sourceOptionsOf(flags: Omit<InputFlags, 'input'>): InputReading {
  return { format: flags.inputFormat, header: flags.header, delimiter: flags.delimiter, encoding: flags.encoding };
}

/** Column and input flags out of commander's untyped options. */
export function tableInputFlags(input: string, opts: Record<string, unknown>): InputFlags & ColumnFlags {
  const list = (k: string) =>
    Array.isArray(opts[k]) && (opts[k] as unknown[]).length > 0 ? (opts[k] as string[]) : undefined;
  const str = (k: string) => (typeof opts[k] === 'string' ? (opts[k] as string) : undefined);
  const flags: InputFlags & ColumnFlags = { input, ...inputFormatFlags(opts) };
  const put = <K extends keyof (InputFlags & ColumnFlags)>(
    key: K,
    value: (InputFlags & ColumnFlags)[K] | undefined,
  ) => {
    if (value !== undefined) flags[key] = value;
  };
  put('emailCol', list('emailCol'));
  put('phoneCol', list('phoneCol'));
  put('emailHashCol', list('emailHashCol'));
  put('phoneHashCol', list('phoneHashCol'));
  put('col', str('col'));
  put('type', str('type') as ColumnKind | undefined);
  return flags;
}

/** INPUT, '-' or nothing: nothing reads stdin when it is piped, and is a usage error on a terminal. */
export function resolveInputArg(input: string | undefined, stdin: { isTTY?: boolean }): string {
  if (input !== undefined) return input;
  if (stdin.isTTY) throw new UserError("no input: give a file, or pipe rows in (use '-' to read stdin explicitly)");
  return '-';
}

/**
 * The parts a run reads, from its INPUT arguments: files in the order given, directories as their files, quoted
 * patterns (`'part-*.csv.gz'`) as the files they match. A pattern that matches nothing is a usage error (exit 2).
 */
export function expandInputArgs(
  args: readonly string[],
  /** Whether this command reads s3:// inputs (map, hash, optout-check: they are listed when the run starts). */
  s3Inputs = false,
): string[] {
  const s3Input = s3Inputs ? undefined : args.find((arg) => isS3Url(arg));
  if (s3Input !== undefined)
    throw new UserError(
      `'${s3Input}': this command reads local files only; copy the object first (aws s3 cp ${s3Input} .) and give the copy`,
      EXIT.usage,
    );
  try {
    return expandInputs(args);
  } catch (err) {
    if (err instanceof InputPartsError) throw new UserError(err.message, EXIT.usage);
    throw err;
  }
}

/** A variadic INPUT argument as commander gives it, as a list (empty: none given). */
export function inputArgs(input: string | readonly string[] | undefined): string[] {
  if (input === undefined) return [];
  return typeof input === 'string' ? (input === '' ? [] : [input]) : [...input];
}
