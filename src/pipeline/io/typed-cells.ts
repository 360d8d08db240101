/** What each output column holds, and how the tool writes its own times, so typed formats write values as what they are. */

/**
 * The type of an output column. Every cell travels as a string (CSV and TSV write it as it is); a typed format
 * (JSONL, Parquet) reads the string by its column's type:
 * - `input`: an input cell, a string exactly as it was read; an empty cell stays "" (it was in the input so).
 * - `string`: the tool's own text (raw UIDs, hashes, statuses, reasons); an empty cell is a missing value: null.
 * - `integer`: the tool's own whole number, in decimal; empty: null.
 * - `boolean`: `true` or `false`; empty: null.
 * - `unix_time`: seconds since 1970-01-01T00:00:00Z, in decimal; empty: null.
 * - `iso_time`: an ISO 8601 UTC time ending in Z, to the second (Parquet: a UTC TIMESTAMP); empty: null.
 */
export type ColumnType = 'input' | 'string' | 'integer' | 'boolean' | 'unix_time' | 'iso_time';

/** Column names with their types, in output order. */
export interface TypedHeader {
  header: string[];
  types: ColumnType[];
}

/** How the tool writes its own times (refresh_from, opted_out_since): `--time-format unix|iso`. */
export type TimeFormat = 'unix' | 'iso';

export const TIME_FORMATS: readonly TimeFormat[] = ['unix', 'iso'];

/** The column type of a time column written in `format`. */
export function timeType(format: TimeFormat): ColumnType {
  return format === 'iso' ? 'iso_time' : 'unix_time';
}

const MAX_DATE_SECONDS = 8.64e12;

/**
 * ISO texts made so far: refresh times fall on UTC midnights, so a run has a few hundred distinct ones, and
 * formatting a Date costs more than the rest of a row's result cells. Emptied when it grows past its bound.
 */
const isoTexts = new Map<number, string>();
const ISO_TEXTS_KEPT = 4096;

/** A time (whole Unix seconds; a fraction is dropped) as a cell: decimal seconds, or `2027-01-05T00:00:00Z`. */
export function timeCell(seconds: number, format: TimeFormat): string {
  const s = Math.floor(seconds);
  if (format === 'unix') return String(s);
  let iso = isoTexts.get(s);
  if (iso !== undefined) return iso;
  // beyond what a Date holds (year 275760) no ISO text exists: the number is still the truth
  if (!(Math.abs(s) <= MAX_DATE_SECONDS)) return String(s);
  // whole seconds: the milliseconds are always .000
  iso = `${new Date(s * 1000).toISOString().slice(0, -5)}Z`;
  if (isoTexts.size >= ISO_TEXTS_KEPT) isoTexts.clear();
  isoTexts.set(s, iso);
  return iso;
}

/** A time in Unix milliseconds (an opt-out time) as a cell, to the second. */
export function timeCellOfMs(ms: number, format: TimeFormat): string {
  return timeCell(Math.floor(ms / 1000), format);
}
