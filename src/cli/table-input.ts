import { Option, type Command } from 'commander';
import type { ColumnFlags, ColumnKind } from '../pipeline/columns.js';
import { UserError } from './exit-codes.js';

/** How the input is read; shared by every command that reads a table (`map`, `hash`...). */
export interface InputFlags {
  /** File path, or '-' for stdin. */
  input: string;
  inputFormat?: 'csv' | 'jsonl' | 'auto';
  delimiter?: string;
  encoding?: 'utf8' | 'latin1';
  /** false: the first line is data; columns are named col1..colN. */
  header?: boolean;
}

/** Repeatable flags; no default, so the help does not print an empty list. */
function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

/** The input and identifier column options shared by the commands that read a table. */
export function addTableInputOptions(cmd: Command): Command {
  return cmd
    .option('--email-col <name>', 'column of raw emails (repeatable)', collect)
    .option('--phone-col <name>', 'column of E.164 phones, e.g. +14155550100 (repeatable)', collect)
    .option('--email-hash-col <name>', 'column of email SHA-256 hashes, base64 or hex (repeatable)', collect)
    .option('--phone-hash-col <name>', 'column of phone SHA-256 hashes, base64 or hex (repeatable)', collect)
    .option('--col <name>', 'an identifier column whose kind --type gives (default: detect each cell)')
    .addOption(new Option('--type <kind>', 'what --col holds').choices(['auto', 'email', 'phone', 'email_hash', 'phone_hash']))
    .addOption(new Option('--input-format <format>', 'input format (auto: .jsonl/.ndjson are JSON Lines)').choices(['auto', 'csv', 'jsonl']).default('auto'))
    .option('--delimiter <char>', 'CSV field delimiter, e.g. ";" or tab (default ",")')
    .addOption(new Option('--encoding <encoding>', 'input text encoding').choices(['utf8', 'latin1']).default('utf8'))
    .option('--no-header', 'the first line is data; columns are named col1, col2, ...');
}

/** Column and input flags out of commander's untyped options. */
export function tableInputFlags(input: string, opts: Record<string, unknown>): InputFlags & ColumnFlags {
  const list = (k: string) => (Array.isArray(opts[k]) && (opts[k] as unknown[]).length > 0 ? (opts[k] as string[]) : undefined);
  const str = (k: string) => (typeof opts[k] === 'string' ? (opts[k] as string) : undefined);
  const flags: InputFlags & ColumnFlags = { input, header: opts.header !== false };
  const put = <K extends keyof (InputFlags & ColumnFlags)>(key: K, value: (InputFlags & ColumnFlags)[K] | undefined) => {
    if (value !== undefined) flags[key] = value;
  };
  put('emailCol', list('emailCol'));
  put('phoneCol', list('phoneCol'));
  put('emailHashCol', list('emailHashCol'));
  put('phoneHashCol', list('phoneHashCol'));
  put('col', str('col'));
  put('type', str('type') as ColumnKind | undefined);
  put('inputFormat', str('inputFormat') as InputFlags['inputFormat']);
  put('delimiter', str('delimiter'));
  put('encoding', str('encoding') as InputFlags['encoding']);
  return flags;
}

/** INPUT, '-' or nothing: nothing reads stdin when it is piped, and is a usage error on a terminal. */
export function resolveInputArg(input: string | undefined, stdin: { isTTY?: boolean }): string {
  if (input !== undefined) return input;
  if (stdin.isTTY) throw new UserError("no input: give a file, or pipe rows in (use '-' to read stdin explicitly)");
  return '-';
}

