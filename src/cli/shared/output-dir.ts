/** `--output-dir DIR`: one output per input, named as its input, in DIR. */
import { statSync } from 'node:fs';
import { basename, join } from 'node:path';
import type { Command } from 'commander';
import type { ColumnType } from '../../pipeline/io/typed-cells.js';
import { partSinks } from '../../pipeline/jobs/output-dir-sinks.js';
import type { PartSinks } from '../../pipeline/io/output/part-sinks.js';
import { isPartsSource } from '../../pipeline/io/parts-source.js';
import type { TableInfo } from '../../pipeline/io/table.js';
import { EXIT, UserError } from './exit-codes.js';
import { quoted } from './user-values.js';

export function addOutputDirOption(cmd: Command): Command {
  return cmd.option(
    '--output-dir <dir>',
    'write one output per input into this directory, named as the input (its format too: CSV, JSON Lines or Parquet, gzip by .gz), instead of -o',
  );
}

export function outputDirOf(opts: Record<string, unknown>): string | undefined {
  return typeof opts.outputDir === 'string' ? opts.outputDir : undefined;
}

/** The output of each input part: DIR/its base name. Refuses what cannot be told apart or written. */
export function partOutputPaths(dir: string, parts: readonly string[], outputGiven: boolean): string[] {
  if (outputGiven) throw new UserError('give either -o FILE or --output-dir DIR, not both', EXIT.usage);
  if (parts.includes('-')) {
    throw new UserError(
      '--output-dir names each output after its input: give input files, not stdin (or use -o FILE)',
      EXIT.usage,
    );
  }
  let isDir = false;
  try {
    isDir = statSync(dir).isDirectory();
  } catch {
    isDir = false;
  }
  if (!isDir) {
    throw new UserError(`--output-dir ${quoted(dir)} is not a directory; create it first`, EXIT.usage);
  }
  const byName = new Map<string, string>();
  return parts.map((part) => {
    const name = basename(part);
    const other = byName.get(name);
    if (other !== undefined) {
      throw new UserError(
        `${quoted(other)} and ${quoted(part)} would both be written as ${quoted(join(dir, name))}: with --output-dir, give inputs with different names`,
        EXIT.usage,
      );
    }
    byName.set(name, part);
    return join(dir, name);
  });
}

/**
 * The sink of a map or hash run with --output-dir: each part's rows to its own output, typed as its format needs.
 */
export function partSinksFor(
  dir: string,
  source: TableInfo,
  header: string[],
  types: readonly ColumnType[],
): PartSinks {
  const parts = isPartsSource(source) ? source.parts : [source.name];
  return partSinks(partOutputPaths(dir, parts, false), source, header, types);
}
