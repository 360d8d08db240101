import { bucketIdOf } from './bucket-answer.js';
import { resultHeader } from '../table/identifier-columns.js';
import { SLOT, SLOT_STATUS_NAMES, type RowChunk } from './row-chunk.js';

/** The columns added per identifier column, after the input's own. */
export const RESULT_COLUMNS = ['raw_uid', 'prev_raw_uid', 'refresh_from', 'status', 'reason'] as const;

/**
 * The output header: the input columns unchanged, then the result columns of each identifier column, prefixed
 * `<column>_` when there are several (so `email_raw_uid`, `phone_raw_uid`...). A name the input already has
 * gets a `_2` suffix, so JSONL keys never collide.
 */
export function outputHeader(inputHeader: readonly string[], identifierColumns: readonly { name: string }[]): string[] {
  return resultHeader(inputHeader, identifierColumns, RESULT_COLUMNS);
}

/** An answered chunk as the output needs it: its rows and the answer of each identifier cell (see RowChunk). */
export type AnsweredRows = Pick<RowChunk, 'rows' | 'width' | 'status' | 'mapped' | 'reason'>;

/**
 * The output rows of an answered chunk: each row's cells with its result cells appended (in place: the input
 * row is not used again), and the rows that have any identifier not mapped, for --rejects.
 */
export function outputRows(chunk: AnsweredRows, rejects: string[][] | null): string[][] {
  const { rows, width, status, mapped, reason } = chunk;
  const out: string[][] = new Array(rows.length);
  for (let r = 0; r < rows.length; r++) {
    const cells = rows[r].cells;
    let rejected = false;
    for (let c = 0; c < width; c++) {
      const slot = r * width + c;
      const s = status[slot];
      if (s === SLOT.mapped) {
        const m = mapped[slot];
        cells.push(
          m === null ? '' : m.u,
          m === null || m.p === null ? '' : m.p,
          m === null ? '' : String(m.r),
          'mapped',
          '',
        );
      } else {
        if (s !== SLOT.missing) rejected = true;
        cells.push('', '', '', SLOT_STATUS_NAMES[s], reason[slot] ?? '');
      }
    }
    out[r] = cells;
    if (rejected && rejects !== null) rejects.push(cells);
  }
  return out;
}

/** `map --api v2`: v2 has no previous raw ID and no refresh time; it has the salt bucket instead. */
export const RESULT_COLUMNS_V2 = ['raw_uid', 'bucket_id', 'status', 'reason'] as const;

export function outputHeaderV2(
  inputHeader: readonly string[],
  identifierColumns: readonly { name: string }[],
): string[] {
  return resultHeader(inputHeader, identifierColumns, RESULT_COLUMNS_V2);
}

/** outputRows for `map --api v2`: raw_uid, bucket_id, status, reason per identifier column. */
export function outputRowsV2(chunk: AnsweredRows, rejects: string[][] | null): string[][] {
  const { rows, width, status, mapped, reason } = chunk;
  const out: string[][] = new Array(rows.length);
  for (let r = 0; r < rows.length; r++) {
    const cells = rows[r].cells;
    let rejected = false;
    for (let c = 0; c < width; c++) {
      const slot = r * width + c;
      const s = status[slot];
      if (s === SLOT.mapped) {
        const m = mapped[slot];
        cells.push(m === null ? '' : m.u, bucketIdOf(m) ?? '', 'mapped', '');
      } else {
        if (s !== SLOT.missing) rejected = true;
        cells.push('', '', SLOT_STATUS_NAMES[s], reason[slot] ?? '');
      }
    }
    out[r] = cells;
    if (rejected && rejects !== null) rejects.push(cells);
  }
  return out;
}
