/** Rows as one block of UTF-8 bytes, column after column, to hand between threads without a string per cell. */

/** Words before a block's cell lengths: its rows, its width. */
const BLOCK_HEAD = 2;

/** A block read in place: no copy of its bytes. */
export interface RowBlockView {
  rows: number;
  width: number;
  /** The UTF-8 length of cell r of column c at c * rows + r. */
  lengths: Uint32Array;
  /** The cells' bytes, column after column, the cells of a column in row order. */
  bytes: Uint8Array;
}

/**
 * Rows as one block of bytes: the row count and width, each cell's UTF-8 length (32 bits, little-endian), then the
 * cells' bytes. Both go column after column, so a column's cells are one run of bytes that a columnar writer takes
 * as it is. Rows are fitted to `width`: missing cells are empty, cells past it are left out.
 */
export function utf8RowBlock(rows: readonly (readonly string[])[], width: number): Uint8Array {
  return utf8ColumnsRowBlock(rows.length, [], rows, width);
}

/** One column's cells as UTF-8 bytes one after another, and each cell's length in bytes (utf8-columns.ts). */
export interface ByteColumn {
  bytes: Uint8Array;
  lengths: Uint32Array;
}

/**
 * A block as utf8RowBlock() makes it, of `count` rows whose first cells are columns already in bytes (null: a
 * column of empty cells), copied as they are, and whose other `tailWidth` cells are `tail`'s rows (fitted to
 * that width). Columns already in bytes are not made into strings and back: the same block, for less work.
 */
export function utf8ColumnsRowBlock(
  count: number,
  columns: readonly (ByteColumn | null)[],
  tail: readonly (readonly string[])[],
  tailWidth: number,
): Uint8Array {
  if (tail.length !== count && tailWidth > 0) throw new Error('a row block whose parts differ in row count');
  const tailCells = count * tailWidth;
  const parts = new Array<string>(tailCells);
  const tailLengths = new Uint32Array(tailCells);
  // rows are read in order (cheaper than column by column), their cells put in their column's place
  for (let r = 0; r < count && tailWidth > 0; r++) {
    const row = tail[r];
    for (let c = 0; c < tailWidth; c++) {
      const cell = row[c] ?? '';
      parts[c * count + r] = cell;
      tailLengths[c * count + r] = cell.length;
    }
  }
  const text = parts.join('');
  const textBytes = Buffer.byteLength(text, 'utf8');
  // not all ASCII (rare): a cell's characters are not its bytes
  if (textBytes !== text.length)
    for (let k = 0; k < tailCells; k++) tailLengths[k] = Buffer.byteLength(parts[k], 'utf8');
  const columnBytes = columns.map((column) => {
    if (column === null) return 0;
    if (column.lengths.length !== count) throw new Error('a row block whose parts differ in row count');
    let total = 0;
    for (let k = 0; k < count; k++) total += column.lengths[k];
    return total;
  });
  const width = columns.length + tailWidth;
  const head = (BLOCK_HEAD + count * width) * 4;
  const byteLength = columnBytes.reduce((a, b) => a + b, 0) + textBytes;
  // a buffer of its own (offset 0), so it can be handed over whole
  const block = Buffer.allocUnsafeSlow(head + byteLength);
  const words = new Uint32Array(block.buffer, block.byteOffset, BLOCK_HEAD + count * width);
  words[0] = count;
  words[1] = width;
  let at = head;
  for (let c = 0; c < columns.length; c++) {
    const column = columns[c];
    if (column === null) {
      words.fill(0, BLOCK_HEAD + c * count, BLOCK_HEAD + (c + 1) * count);
      continue;
    }
    words.set(column.lengths, BLOCK_HEAD + c * count);
    block.set(column.bytes.subarray(0, columnBytes[c]), at);
    at += columnBytes[c];
  }
  words.set(tailLengths, BLOCK_HEAD + columns.length * count);
  block.write(text, at, 'utf8');
  return new Uint8Array(block.buffer, block.byteOffset, block.byteLength);
}

/** The rows of a block made by utf8RowBlock(). */
export function blockRowCount(block: Uint8Array): number {
  return new DataView(block.buffer, block.byteOffset, BLOCK_HEAD * 4).getUint32(0, true);
}

/** A block made by utf8RowBlock(), read in place (a block not aligned to 4 bytes is copied first). */
export function viewOfBlock(block: Uint8Array): RowBlockView {
  if (block.byteOffset % 4 !== 0) block = block.slice();
  const [rows, width] = new Uint32Array(block.buffer, block.byteOffset, BLOCK_HEAD);
  const cells = rows * width;
  const lengths = new Uint32Array(block.buffer, block.byteOffset + BLOCK_HEAD * 4, cells);
  const offset = (BLOCK_HEAD + cells) * 4;
  let total = 0;
  for (let k = 0; k < cells; k++) total += lengths[k];
  if (offset + total !== block.byteLength) throw new Error('a row block whose lengths do not cover its bytes');
  const bytes = new Uint8Array(block.buffer, block.byteOffset + offset, total);
  return { rows, width, lengths, bytes };
}

/** The cells of a block made by utf8RowBlock(), as rows of strings again. */
export function cellsOfBlock(block: Uint8Array): string[][] {
  const { rows, width, lengths, bytes } = viewOfBlock(block);
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const text = buffer.toString('utf8');
  // all ASCII: characters are bytes, and the cells are slices of one string
  const ascii = text.length === buffer.length;
  const out: string[][] = new Array(rows);
  for (let r = 0; r < rows; r++) out[r] = new Array<string>(width);
  let at = 0;
  for (let c = 0; c < width; c++) {
    for (let r = 0; r < rows; r++) {
      const length = lengths[c * rows + r];
      out[r][c] = ascii ? text.slice(at, at + length) : buffer.toString('utf8', at, at + length);
      at += length;
    }
  }
  return out;
}
