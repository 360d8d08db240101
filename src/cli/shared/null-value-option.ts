// --null-value S: cells, besides the empty one and \N, that stand for no identifier (NULL as a database unload wrote it).
import type { Command } from 'commander';
import { collectRepeated } from './repeated-flags.js';

export function addNullValueOption(cmd: Command): Command {
  return cmd.option(
    '--null-value <S>',
    'an identifier cell written exactly S is missing, as an empty cell is (repeatable); \\N, the NULL of Snowflake, ' +
      'PostgreSQL and MySQL unloads, always is. The input cell is still written as read',
    collectRepeated,
  );
}

/** The --null-value markers as given, in order. */
export function nullValuesOf(opts: Record<string, unknown>): string[] | undefined {
  return Array.isArray(opts.nullValue) ? (opts.nullValue as string[]) : undefined;
}
