/** Text cells kept as one column's UTF-8 bytes, outside the V8 heap, and made into strings again. */

/** A run of one column's cells: their UTF-8 bytes one after another, and each cell's length in bytes. */
export interface Utf8Column {
  bytes: Buffer;
  lengths: Uint32Array;
  /** Every byte is ASCII: a cell's characters are its bytes. */
  ascii: boolean;
}

/** Cells `from` to `to` of `cells` as one column's bytes. */
export function utf8Column(cells: readonly string[], from: number, to: number): Utf8Column {
  const count = to - from;
  const text = count === 1 ? cells[from] : cells.slice(from, to).join('');
  const byteLength = Buffer.byteLength(text, 'utf8');
  const ascii = byteLength === text.length;
  const lengths = new Uint32Array(count);
  for (let k = 0; k < count; k++)
    lengths[k] = ascii ? cells[from + k].length : Buffer.byteLength(cells[from + k], 'utf8');
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
