/** The output of `map`: which columns it has, of which types, and the cells of an answered chunk's rows. */
import { bucketIdOf } from './bucket-answer.js';
import { hashText, type PreparedRows } from './prepare-rows.js';
import { defaultResultPrefixes, resultHeader } from './identifier-columns.js';
import { SLOT, SLOT_STATUS_NAMES, type RowChunk } from './row-chunk.js';
import { hashCell, type HashEncoding } from '../io/output/hash-cells.js';
import { timeCell, timeType, type ColumnType, type TimeFormat, type TypedHeader } from '../io/typed-cells.js';
import type { MappedV3 } from '../../protocol/index.js';

/** The columns added per identifier column, after the input's own. */
export const RESULT_COLUMNS = ['raw_uid', 'prev_raw_uid', 'refresh_from', 'status', 'reason'] as const;

/** `map --api v2`: v2 has no previous raw ID and no refresh time; it has the salt bucket instead. */
export const RESULT_COLUMNS_V2 = ['raw_uid', 'bucket_id', 'status', 'reason'] as const;

/** --emit-hash: the hash sent for the identifier (base64 as the state file holds it, or hex: --hash-encoding) and its type. */
export const HASH_COLUMNS = ['hash', 'hash_type'] as const;

/**
 * How the output is laid out beyond the answers themselves. Plain data: the row threads are given it too, so
 * the rows they encode are the same bytes.
 */
export interface ResultLayout {
  /** The input columns written before the result columns, by their index in the input; null: all, as read. */
  keep: readonly number[] | null;
  /** Per identifier column, what the names of its result columns start with ('' for none). */
  prefixes: readonly string[];
  /** Also write `hash` and `hash_type` per identifier column, after `reason`. */
  emitHash: boolean;
  /** How the hashes of emitHash are written; absent: base64. */
  hashEncoding?: HashEncoding | undefined;
  /** How refresh_from is written. */
  timeFormat: TimeFormat;
}

/** Today's layout: every input column, `raw_uid`... unprefixed for one identifier column, `<name>_raw_uid`... for several. */
export function defaultLayout(identifierColumns: readonly { name: string }[]): ResultLayout {
  return { keep: null, prefixes: defaultResultPrefixes(identifierColumns), emitHash: false, timeFormat: 'unix' };
}

function resultFields(api: 'v3' | 'v2', emitHash: boolean): string[] {
  const fields: string[] = api === 'v2' ? [...RESULT_COLUMNS_V2] : [...RESULT_COLUMNS];
  if (emitHash) fields.push(...HASH_COLUMNS);
  return fields;
}

function fieldType(field: string, timeFormat: TimeFormat): ColumnType {
  return field === 'refresh_from' ? timeType(timeFormat) : 'string';
}

/**
 * The output's columns: the kept input columns (strings as read), then the result columns of each identifier
 * column under its prefix. A result name that an input column already has gets `_2`, so JSONL keys never collide.
 */
export function outputColumns(
  inputHeader: readonly string[],
  identifierColumns: readonly { name: string }[],
  layout: ResultLayout = defaultLayout(identifierColumns),
  api: 'v3' | 'v2' = 'v3',
): TypedHeader {
  const kept = layout.keep === null ? inputHeader : layout.keep.map((i) => inputHeader[i]);
  const fields = resultFields(api, layout.emitHash);
  const header = resultHeader(kept, identifierColumns, fields, layout.prefixes);
  const types: ColumnType[] = kept.map(() => 'input');
  for (let c = 0; c < identifierColumns.length; c++)
    for (const field of fields) types.push(fieldType(field, layout.timeFormat));
  return { header, types };
}

/** The output header with the default layout (see outputColumns). */
export function outputHeader(inputHeader: readonly string[], identifierColumns: readonly { name: string }[]): string[] {
  return outputColumns(inputHeader, identifierColumns).header;
}

export function outputHeaderV2(
  inputHeader: readonly string[],
  identifierColumns: readonly { name: string }[],
): string[] {
  return outputColumns(inputHeader, identifierColumns, defaultLayout(identifierColumns), 'v2').header;
}

/** What --emit-hash writes: the hashes that were sent, as prepareRows made them (see PreparedRows). */
export type SentHashes = Pick<PreparedRows, 'status' | 'phone' | 'hashes'>;

/**
 * An answered chunk as the output needs it: its rows and the answer of each identifier cell (see RowChunk),
 * and for --emit-hash the hashes that were sent.
 */
export type AnsweredRows = Pick<RowChunk, 'rows' | 'width' | 'status' | 'mapped' | 'reason'> & {
  sent?: SentHashes | undefined;
};

/** Appends the result cells of one identifier cell (a slot) to an output row. */
type SlotWriter = (
  cells: string[],
  status: number,
  mapped: MappedV3 | null,
  reason: string | null,
  timeFormat: TimeFormat,
) => void;

const writeV3: SlotWriter = (cells, s, m, reason, timeFormat) => {
  if (s === SLOT.mapped) {
    cells.push(
      m === null ? '' : m.u,
      m === null || m.p === null ? '' : m.p,
      m === null ? '' : timeCell(m.r, timeFormat),
      'mapped',
      '',
    );
  } else {
    cells.push('', '', '', SLOT_STATUS_NAMES[s], reason ?? '');
  }
};

const writeV2: SlotWriter = (cells, s, m, reason) => {
  if (s === SLOT.mapped) cells.push(m === null ? '' : m.u, bucketIdOf(m) ?? '', 'mapped', '');
  else cells.push('', '', SLOT_STATUS_NAMES[s], reason ?? '');
};

/**
 * The output rows of an answered chunk: each row's kept input cells with the result cells appended (with every
 * input column kept, in place: the input row is not used again), and the rows that have any identifier not
 * mapped, for --rejects.
 */
export function outputRows(chunk: AnsweredRows, rejects: string[][] | null, layout?: ResultLayout): string[][] {
  return answeredRows(chunk, rejects, layout, writeV3);
}

/** outputRows for `map --api v2`: raw_uid, bucket_id, status, reason per identifier column. */
export function outputRowsV2(chunk: AnsweredRows, rejects: string[][] | null, layout?: ResultLayout): string[][] {
  return answeredRows(chunk, rejects, layout, writeV2);
}

function answeredRows(
  chunk: AnsweredRows,
  rejects: string[][] | null,
  layout: ResultLayout | undefined,
  write: SlotWriter,
): string[][] {
  const { rows, width, status, mapped, reason } = chunk;
  const keep = layout?.keep ?? null;
  const timeFormat = layout?.timeFormat ?? 'unix';
  const sent = layout?.emitHash === true ? sentHashesOf(chunk) : null;
  const hashEncoding = layout?.hashEncoding;
  const out: string[][] = new Array(rows.length);
  // the sent hashes are in slot order, one per slot that was valid when prepared
  let h = 0;
  for (let r = 0; r < rows.length; r++) {
    const input = rows[r].cells;
    const cells = keep === null ? input : keep.map((i) => input[i] ?? '');
    let rejected = false;
    for (let c = 0; c < width; c++) {
      const slot = r * width + c;
      const s = status[slot];
      if (s !== SLOT.mapped && s !== SLOT.missing) rejected = true;
      write(cells, s, mapped[slot], reason[slot], timeFormat);
      if (sent !== null) {
        if (sent.status[slot] === SLOT.pending)
          cells.push(hashCell(hashText(sent.hashes, h++), hashEncoding), sent.phone[slot] === 1 ? 'phone' : 'email');
        else cells.push('', '');
      }
    }
    out[r] = cells;
    if (rejected && rejects !== null) rejects.push(cells);
  }
  return out;
}

function sentHashesOf(chunk: AnsweredRows): SentHashes {
  if (chunk.sent === undefined)
    throw new Error('--emit-hash: the chunk was answered without the hashes that were sent');
  return chunk.sent;
}
