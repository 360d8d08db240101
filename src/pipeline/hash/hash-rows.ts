import { hashCell, type HashEncoding } from '../io/output/hash-cells.js';
import { needsPhoneRegion } from '../../identity/index.js';
import { countryCellOf, isMissingCell, prepareCell, type IdentifierColumn } from '../map/identifier-columns.js';
import { rowProblemInvalidates, rowProblemReason, type InputRow } from '../io/table.js';

/** The columns `hash` adds per identifier column (prefixed `<column>_` when there are several). */
export const HASH_FIELDS = ['hash', 'hash_type', 'status', 'reason'] as const;

/** The summary's name for rows whose cells did not line up with the header (the row's reason says how). */
const RAGGED_REASON = 'more cells than the header';

/** What `hash` found, as plain numbers: added up over chunks, whichever thread hashed them. */
export interface HashCounts {
  rows: number;
  missing: number;
  /** Per identifier column. */
  ok: number[];
  invalid: number[];
  /** Invalid cells by reason. */
  reasons: Record<string, number>;
  /** Phones hashed. */
  validPhones: number;
  /** Invalid cells written as phone numbers are, refused only for want of a phone region (needsPhoneRegion). */
  phonesNeedingRegion: number;
}

export function emptyHashCounts(width: number): HashCounts {
  return {
    rows: 0,
    missing: 0,
    ok: new Array<number>(width).fill(0),
    invalid: new Array<number>(width).fill(0),
    reasons: {},
    validPhones: 0,
    phonesNeedingRegion: 0,
  };
}

export function addHashCounts(into: HashCounts, more: HashCounts): void {
  into.rows += more.rows;
  into.missing += more.missing;
  into.validPhones += more.validPhones;
  into.phonesNeedingRegion += more.phonesNeedingRegion;
  for (let c = 0; c < into.ok.length; c++) {
    into.ok[c] += more.ok[c];
    into.invalid[c] += more.invalid[c];
  }
  for (const [reason, n] of Object.entries(more.reasons)) into.reasons[reason] = (into.reasons[reason] ?? 0) + n;
}

/**
 * `hash`'s output rows: each row's cells (those of `keep`, by index; null: all, in place, as the input row is not
 * used again) with hash (in `hashEncoding`, default base64), hash_type, status and reason appended per identifier
 * column. The same code runs on the
 * main thread and in worker threads.
 */
export function hashRows(
  rows: readonly InputRow[],
  columns: readonly IdentifierColumn[],
  counts: HashCounts,
  keep: readonly number[] | null = null,
  hashEncoding?: HashEncoding,
): string[][] {
  const out: string[][] = new Array(rows.length);
  for (let r = 0; r < rows.length; r++) {
    const row = rows[r];
    const input = row.cells;
    const cells = keep === null ? input : keep.map((i) => input[i] ?? '');
    out[r] = cells;
    if (row.problem !== undefined && rowProblemInvalidates(row.problem)) {
      const reason = rowProblemReason(row.problem);
      for (let c = 0; c < columns.length; c++) {
        cells.push('', '', 'invalid', reason);
        invalid(counts, c, RAGGED_REASON);
      }
      continue;
    }
    for (let c = 0; c < columns.length; c++) {
      const column = columns[c];
      const cell = input[column.index];
      if (isMissingCell(column, cell)) {
        cells.push('', '', 'missing', 'empty');
        counts.missing++;
        continue;
      }
      const prepared = prepareCell(column, cell, countryCellOf(column, input));
      if (prepared.ok) {
        cells.push(hashCell(prepared.hash, hashEncoding), prepared.type, 'ok', '');
        counts.ok[c]++;
        if (prepared.type === 'phone') counts.validPhones++;
      } else {
        cells.push('', '', 'invalid', prepared.reason);
        invalid(counts, c, prepared.reason);
        if (needsPhoneRegion(cell, prepared)) counts.phonesNeedingRegion++;
      }
    }
  }
  counts.rows += rows.length;
  return out;
}

function invalid(counts: HashCounts, column: number, reason: string): void {
  counts.invalid[column]++;
  counts.reasons[reason] = (counts.reasons[reason] ?? 0) + 1;
}
