/** The typed-output (Parquet) column types of a result table: input columns as read, result columns typed. */
import type { OutputColumnType } from './table.js';

/**
 * Types for an output header made of `inputWidth` input columns followed by `fields` once per identifier
 * column (as resultHeader builds it). Input cells stay strings exactly as read ('' included). Among the
 * result fields `refresh_from` is a number (Unix seconds as INT64, or a timestamp), `status` always has a
 * value, and every other field ('raw_uid', 'reason', ...) is null where it is empty.
 */
export function resultColumnTypes(
  inputWidth: number,
  identifierColumns: number,
  fields: readonly string[],
  refreshFrom: 'int64' | 'timestamp' = 'int64',
): OutputColumnType[] {
  const types: OutputColumnType[] = new Array<OutputColumnType>(inputWidth).fill('string');
  for (let c = 0; c < identifierColumns; c++) {
    for (const field of fields)
      types.push(field === 'refresh_from' ? refreshFrom : field === 'status' ? 'string' : 'string-or-null');
  }
  return types;
}
