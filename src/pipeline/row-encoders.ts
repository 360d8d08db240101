import { stringify } from 'csv-stringify/sync';

/** Output rows to text: the same function inline and in an encoding worker, so the bytes cannot differ. */
export type RowEncoder = (rows: readonly (readonly string[])[]) => string;

/** What an encoder needs to know; plain data, so it can be handed to a worker thread. */
export type RowFormat = { format: 'csv' } | { format: 'jsonl'; header: readonly string[] };

export function rowEncoder(format: RowFormat): RowEncoder {
  return format.format === 'jsonl' ? jsonlEncoder(format.header) : csvEncoder();
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
  return plainRowPattern(cells.length).test(line) ? line + '\n' : stringify([cells as string[]], CSV_OPTIONS);
}

/**
 * Nearly every output cell (hashes, digits, statuses) needs no quoting, so such rows are joined directly, at a
 * fraction of csv-stringify's per-field cost; each run of other rows is handed to csv-stringify, which does all
 * real quoting.
 */
function csvEncoder(): RowEncoder {
  return (rows) => {
    let out = '';
    let quotedFrom = -1;
    for (let r = 0; r < rows.length; r++) {
      const cells = rows[r];
      const line = cells.join(',');
      if (plainRowPattern(cells.length).test(line)) {
        if (quotedFrom !== -1) {
          out += stringify(rows.slice(quotedFrom, r) as string[][], CSV_OPTIONS);
          quotedFrom = -1;
        }
        out += line + '\n';
      } else if (quotedFrom === -1) {
        quotedFrom = r;
      }
    }
    if (quotedFrom !== -1) out += stringify(rows.slice(quotedFrom) as string[][], CSV_OPTIONS);
    return out;
  };
}

/** Each row as one JSON object keyed by the header; the keys are encoded once, not per row. */
function jsonlEncoder(header: readonly string[]): RowEncoder {
  const keys = header.map((name, i) => `${i === 0 ? '{' : ','}${JSON.stringify(name)}:`);
  return (rows) => {
    let out = '';
    for (const row of rows) {
      if (keys.length === 0) {
        out += '{}\n';
        continue;
      }
      for (let i = 0; i < keys.length; i++) out += keys[i] + JSON.stringify(row[i] ?? '');
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
