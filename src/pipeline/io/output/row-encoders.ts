import { stringify } from 'csv-stringify/sync';
import { encodeTsvRows } from './tsv-encoder.js';
import type { ColumnType } from '../typed-cells.js';

/** Output rows to text: the same function inline and in an encoding worker, so the bytes cannot differ. */
export type RowEncoder = (rows: readonly (readonly string[])[]) => string;

/**
 * What an encoder needs to know; plain data, so it can be handed to a worker thread. JSONL: the keys, and the
 * type of each column (absent: every column is an `input` one, a string as it is).
 */
export type RowFormat =
  | { format: 'csv' }
  | { format: 'tsv' }
  | { format: 'jsonl'; header: readonly string[]; types?: readonly ColumnType[] };

export function rowEncoder(format: RowFormat): RowEncoder {
  switch (format.format) {
    case 'jsonl':
      return jsonlEncoder(format.header, format.types);
    case 'tsv':
      return encodeTsvRows;
    case 'csv':
      return csvEncoder();
  }
}

/** The encoder settings of an output format; the header is what JSONL names its keys by, the types how it writes values. */
export function rowFormatOf(
  format: 'csv' | 'tsv' | 'jsonl',
  header: readonly string[],
  types?: readonly ColumnType[],
): RowFormat {
  if (format !== 'jsonl') return { format };
  if (types !== undefined && types.length !== header.length)
    throw new Error(`${types.length} column types for ${header.length} columns`);
  return types === undefined ? { format, header } : { format, header, types };
}

/** Whether the format writes the header as its first line (CSV and TSV do; a JSONL row names its own keys). */
export function writesHeaderLine(format: RowFormat): boolean {
  return format.format !== 'jsonl';
}

/**
 * csv-stringify's options for the CSV output. Because record_delimiter is given, csv-stringify turns
 * quote_record_delimiter off and quotes a field only for '"', ',' or '\n'; quoted_match adds a lone '\r', which
 * this tool's own reader (and Excel's) takes as a line break: unquoted, it would split the row on reading back.
 * Spaces, tabs, an empty field or a leading '=' are written as they are.
 */
export const CSV_OPTIONS = { eof: true, record_delimiter: '\n', quoted_match: /\r/ } as const;

/**
 * Regexps that accept a row joined with ',' exactly when it has `width` cells and none of them needs quoting
 * (one that holds a ',' shows up as a comma too many). A row with '\r' goes to csv-stringify too (quoted_match). One regexp test on the joined row was the fastest check measured (against a per-cell regexp,
 * per-cell indexOf and character loops). The class must keep excluding ',': that makes the pattern unambiguous,
 * so it runs in linear time; a class that admits ',' backtracks exponentially on a failing row.
 */
const plainRowByWidth = new Map<number, RegExp>();

function plainRowPattern(width: number): RegExp {
  let re = plainRowByWidth.get(width);
  if (re === undefined) {
    re = width === 0 ? /^$/ : new RegExp(`^[^",\\n\\r]*(?:,[^",\\n\\r]*){${width - 1}}$`);
    plainRowByWidth.set(width, re);
  }
  return re;
}

/**
 * One CSV record with its '\n', byte for byte what csv-stringify/sync writes for it with CSV_OPTIONS. An absent
 * cell is written as an empty one, as csv-stringify does.
 */
export function encodeCsvRow(cells: readonly (string | undefined)[]): string {
  const line = cells.join(',');
  return plainRowPattern(cells.length).test(line) ? `${line}\n` : quotedRow(cells);
}

const NEEDS_QUOTING = /[",\n\r]/;

/**
 * A row with a field to quote, field by field: csv-stringify decides the quoting of each field on its own, so
 * the fields that need none are written as they are and the others as csv-stringify writes them alone. Those
 * repeat (a reason text such as "invalid phone: ..., no spaces or punctuation" on thousands of rows), so their
 * quoted form is kept: most of a csv-stringify call's cost is setting up its options.
 */
function quotedRow(cells: readonly (string | undefined)[]): string {
  let line = '';
  for (let i = 0; i < cells.length; i++) {
    const cell = cells[i] ?? '';
    if (i > 0) line += ',';
    line += NEEDS_QUOTING.test(cell) ? quotedField(cell) : cell;
  }
  return `${line}\n`;
}

const quotedFields = new Map<string, string>();
const QUOTED_FIELDS_KEPT = 1000;
const QUOTED_FIELD_KEPT_LENGTH = 256;

function quotedField(cell: string): string {
  let quoted = quotedFields.get(cell);
  if (quoted === undefined) {
    quoted = stringify([[cell]], CSV_OPTIONS).slice(0, -1);
    if (quotedFields.size < QUOTED_FIELDS_KEPT && cell.length <= QUOTED_FIELD_KEPT_LENGTH)
      quotedFields.set(cell, quoted);
  }
  return quoted;
}

/**
 * Nearly every output cell (hashes, digits, statuses) needs no quoting, so such rows are joined directly, at a
 * fraction of csv-stringify's per-field cost; in the other rows csv-stringify quotes the fields that need it.
 */
function csvEncoder(): RowEncoder {
  return (rows) => {
    let out = '';
    for (let r = 0; r < rows.length; r++) out += encodeCsvRow(rows[r]);
    return out;
  };
}

/** How the JSONL encoder writes a cell of each column type (see ColumnType). */
const AS_INPUT = 0;
const AS_STRING = 1;
const AS_NUMBER = 2;
const AS_BOOLEAN = 3;

const JSONL_CODE: Record<ColumnType, number> = {
  input: AS_INPUT,
  string: AS_STRING,
  iso_time: AS_STRING,
  integer: AS_NUMBER,
  unix_time: AS_NUMBER,
  boolean: AS_BOOLEAN,
};

/** A decimal integer as JSON writes one: no leading zeros, no plus sign. */
const JSON_INTEGER = /^-?(?:0|[1-9][0-9]*)$/;

/**
 * A cell of one of the tool's own columns as a JSON value: an empty cell is null; a number or a boolean is
 * written bare when the cell is one, and as a string otherwise, so the line stays valid JSON whatever it holds.
 */
function typedValue(code: number, cell: string): string {
  if (cell === '') return 'null';
  if (code === AS_NUMBER && JSON_INTEGER.test(cell)) return cell;
  if (code === AS_BOOLEAN && (cell === 'true' || cell === 'false')) return cell;
  return JSON.stringify(cell);
}

/**
 * Each row as one JSON object keyed by the header; the keys are encoded once, not per row. Input cells are
 * strings exactly as read ("" included); the tool's own columns are typed by `types` (see ColumnType).
 */
function jsonlEncoder(header: readonly string[], types: readonly ColumnType[] | undefined): RowEncoder {
  const keys = header.map((name, i) => `${i === 0 ? '{' : ','}${JSON.stringify(name)}:`);
  const codes = Uint8Array.from(header, (_, i) => JSONL_CODE[types?.[i] ?? 'input']);
  return (rows) => {
    let out = '';
    for (const row of rows) {
      if (keys.length === 0) {
        out += '{}\n';
        continue;
      }
      for (let i = 0; i < keys.length; i++) {
        const code = codes[i];
        out += keys[i] + (code === AS_INPUT ? JSON.stringify(row[i] ?? '') : typedValue(code, row[i] ?? ''));
      }
      out += '}\n';
    }
    return out;
  };
}

/**
 * Rows as one string plus lengths. Structured cloning a string[][] for a worker costs about as much as encoding
 * it; one concatenated string is copied in one go. Lengths rather than a separator, because a cell may hold any
 * character (a JSONL value can hold "\u0000").
 */
export interface PackedRows {
  text: string;
  /** UTF-16 length of each cell, row after row. */
  cellLengths: Uint32Array;
  /** Cells per row. */
  rowWidths: Uint32Array;
}

export function packRows(rows: readonly (readonly (string | undefined)[])[]): PackedRows {
  let cellCount = 0;
  for (let r = 0; r < rows.length; r++) cellCount += rows[r].length;
  const cellLengths = new Uint32Array(cellCount);
  const rowWidths = new Uint32Array(rows.length);
  const parts: string[] = new Array(cellCount);
  let n = 0;
  for (let r = 0; r < rows.length; r++) {
    const row = rows[r];
    rowWidths[r] = row.length;
    for (let c = 0; c < row.length; c++) {
      // an absent cell encodes as an empty one in both formats
      const cell = row[c] ?? '';
      parts[n] = cell;
      cellLengths[n++] = cell.length;
    }
  }
  return { text: parts.join(''), cellLengths, rowWidths };
}

export function unpackRows(packed: PackedRows): string[][] {
  const { text, cellLengths, rowWidths } = packed;
  const rows: string[][] = new Array(rowWidths.length);
  let pos = 0;
  let n = 0;
  for (let r = 0; r < rowWidths.length; r++) {
    const width = rowWidths[r];
    const row: string[] = new Array(width);
    for (let c = 0; c < width; c++) {
      const end = pos + cellLengths[n++];
      row[c] = text.slice(pos, end);
      pos = end;
    }
    rows[r] = row;
  }
  if (pos !== text.length) throw new Error(`packed rows: ${text.length - pos} characters left over`);
  return rows;
}
