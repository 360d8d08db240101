/** The column types of a Parquet input, and the check that identifier columns hold text; no Parquet reader needed. */
import { InputError } from '../table.js';

/** What a top-level column of a Parquet file holds: text, another scalar type, or a nested structure. */
export type ParquetColumnKind = 'string' | 'scalar' | 'nested';

export interface ParquetColumn {
  name: string;
  kind: ParquetColumnKind;
  /** For messages: the physical and logical type as the file declares it (e.g. `INT64`, `struct`). */
  declared: string;
}

/**
 * The identifier columns must hold text: a number or a nested value is not an email, a phone or a hash as
 * the service reads them, and turning it into one would be a guess. Any input can be given: only a Parquet
 * source knows its column types, so for CSV and JSONL this checks nothing.
 */
export function requireTextColumns(
  source: { name: string; columns?: readonly ParquetColumn[] },
  names: readonly string[],
): void {
  const columns = source.columns;
  if (columns === undefined) return;
  for (const name of names) {
    const column = columns.find((c) => c.name === name);
    if (column === undefined || column.kind === 'string') continue;
    const what = column.kind === 'nested' ? `a nested column (${column.declared})` : `of type ${column.declared}`;
    throw new InputError(
      source.name,
      undefined,
      `identifier column '${name}' is ${what}, not a string column`,
      'identifiers must be stored as strings: cast the column to VARCHAR/STRING when exporting',
    );
  }
}
