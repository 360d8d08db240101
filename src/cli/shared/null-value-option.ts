// --null-value S: cells, besides the empty one and \N, that stand for no identifier (NULL as a database unload wrote it).
import type { Command } from 'commander';
import type { IdentifierColumn } from '../../pipeline/map/identifier-columns.js';
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

/** The columns with the user's markers on each of them (all kinds: a NULL is no hash either). */
export function withNullMarkers<C extends IdentifierColumn>(
  columns: readonly C[],
  markers: readonly string[] | undefined,
): C[] {
  if (markers === undefined || markers.length === 0) return [...columns];
  return columns.map((c) => ({ ...c, nullMarkers: [...markers] }));
}
