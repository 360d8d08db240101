/** Text cells kept as one column's UTF-8 bytes, outside the V8 heap, and made into strings again. */
import { isAscii } from 'node:buffer';

/**
 * A cell as read: text, or the UTF-8 bytes of a stored string not yet decoded. Decoded, such bytes are what a
 * UTF-8 decoder makes of them (TextDecoder: a malformed sequence as U+FFFD, a leading byte order mark dropped),
 * as a reader that decodes every string would give them.
 */
export type TextCell = string | Uint8Array;

/** A run of one column's cells: their UTF-8 bytes one after another, and each cell's length in bytes. */
export interface Utf8Column {
  bytes: Buffer;
  lengths: Uint32Array;
  /** Every byte is ASCII: a cell's characters are its bytes. */
  ascii: boolean;
}

/** A chunk of rows as each column's UTF-8 bytes; firstLine is the first row's number, from 1. */
export interface Utf8Chunk {
  firstLine: number;
  rows: number;
  /** Per column of the header, in order. */
  columns: Utf8Column[];
}

const decoder = new TextDecoder();

/** A cell as a string. */
export function cellString(cell: TextCell): string {
  return typeof cell === 'string' ? cell : decoder.decode(cell);
}

/** Cells `from` to `to` of `cells` as one column's bytes. */
export function utf8Column(cells: readonly TextCell[], from: number, to: number): Utf8Column {
  // stored bytes (or empty cells) only: copied as they are, unless some byte is not ASCII
  let byteLength = 0;
  for (let k = from; k < to; k++) {
    const cell = cells[k];
    if (typeof cell !== 'string') byteLength += cell.length;
    else if (cell.length > 0) return textColumn(cells, from, to);
  }
  const bytes = Buffer.allocUnsafe(byteLength);
  const lengths = new Uint32Array(to - from);
  let at = 0;
  for (let k = from; k < to; k++) {
    const cell = cells[k];
    if (typeof cell === 'string') continue;
    const n = cell.length;
    // a short cell is copied faster byte by byte than by a call that copies a range
    if (n < 24) for (let i = 0; i < n; i++) bytes[at + i] = cell[i];
    else bytes.set(cell, at);
    lengths[k - from] = n;
    at += n;
  }
  // ASCII bytes decode to the same characters whatever the decoder; anything else is decoded as the type says
  return isAscii(bytes) ? { bytes, lengths, ascii: true } : textColumn(cells, from, to);
}

/**
 * Cells `from` to `to` of a column stored as one run of bytes (`values`) and where each cell starts in it
 * (`offsets`, one more than the cells), as one column's bytes; a cell that `valid` says is null is empty. The
 * same column as utf8Column() makes of the same cells.
 */
export function utf8ColumnOfRuns(
  values: Uint8Array,
  offsets: Int32Array | BigInt64Array,
  valid: ((cell: number) => boolean) | undefined,
  from: number,
  to: number,
): Utf8Column {
  const count = to - from;
  const lengths = new Uint32Array(count);
  let bytes: Buffer;
  if (valid === undefined) {
    // no null cell: the cells' bytes already follow each other
    const start = Number(offsets[from]);
    let at = start;
    for (let k = 0; k < count; k++) {
      const end = Number(offsets[from + k + 1]);
      lengths[k] = end - at;
      at = end;
    }
    bytes = Buffer.from(values.subarray(start, at));
  } else {
    let byteLength = 0;
    for (let k = 0; k < count; k++) {
      const cell = from + k;
      if (valid(cell)) lengths[k] = Number(offsets[cell + 1]) - Number(offsets[cell]);
      byteLength += lengths[k];
    }
    bytes = Buffer.allocUnsafe(byteLength);
    let at = 0;
    for (let k = 0; k < count; k++) {
      if (lengths[k] === 0) continue;
      const start = Number(offsets[from + k]);
      bytes.set(values.subarray(start, start + lengths[k]), at);
      at += lengths[k];
    }
  }
  if (isAscii(bytes)) return { bytes, lengths, ascii: true };
  // some byte is not ASCII: each cell is decoded as utf8Column() decodes stored bytes
  const cells = new Array<TextCell>(count);
  let at = 0;
  for (let k = 0; k < count; k++) {
    cells[k] = bytes.subarray(at, at + lengths[k]);
    at += lengths[k];
  }
  return textColumn(cells, 0, count);
}

/** Cells `from` to `to` as strings, then as one column's bytes. */
function textColumn(cells: readonly TextCell[], from: number, to: number): Utf8Column {
  const count = to - from;
  const strings = new Array<string>(count);
  for (let k = 0; k < count; k++) strings[k] = cellString(cells[from + k]);
  const text = strings.join('');
  const byteLength = Buffer.byteLength(text, 'utf8');
  const ascii = byteLength === text.length;
  const lengths = new Uint32Array(count);
  for (let k = 0; k < count; k++) lengths[k] = ascii ? strings[k].length : Buffer.byteLength(strings[k], 'utf8');
  const bytes = Buffer.allocUnsafe(byteLength);
  bytes.write(text, 0, 'utf8');
  return { bytes, lengths, ascii };
}

/** The cells of a column made by utf8Column(), as strings again. */
export function columnCells(column: Utf8Column): string[] {
  const { bytes, lengths, ascii } = column;
  const out = new Array<string>(lengths.length);
  // all ASCII: the cells are slices of one string, decoded at once
  const text = ascii ? bytes.toString('latin1') : '';
  let at = 0;
  for (let k = 0; k < lengths.length; k++) {
    const end = at + lengths[k];
    out[k] = ascii ? text.slice(at, end) : bytes.toString('utf8', at, end);
    at = end;
  }
  return out;
}
