import { needsPhoneRegion } from '../../identity/index.js';
import { countryCellOf, isMissingCell, prepareCell, type IdentifierColumn } from './identifier-columns.js';
import { SLOT } from './row-chunk.js';
import { rowProblemInvalidates, rowProblemReason, type InputRow, type RowProblem } from '../io/table.js';

/**
 * What each identifier cell of a block of rows is before anything is sent: valid (with its DII type and hash),
 * invalid (with the reason) or missing. Plain data (typed arrays, strings), so a worker thread that parsed and
 * prepared the rows can hand it to the main thread without the rows themselves.
 */
export interface PreparedRows {
  rowCount: number;
  /** Identifier columns per row; slot = row * width + column. */
  width: number;
  /** Per slot: SLOT.pending (valid: to be answered), SLOT.invalid or SLOT.missing. */
  status: Uint8Array;
  /** Per slot: 1 when the valid identifier is a phone, 0 for an email. */
  phone: Uint8Array;
  /**
   * Hashes (base64 SHA-256) of the valid slots, in slot order, as their text's bytes: HASH_BYTES each, in a buffer
   * of their own (byte offset 0, so a thread hands it over whole and the reader may view it as 32-bit words). One
   * buffer crosses between threads and is read in place, where a string per hash would be cloned and kept.
   */
  hashes: Uint8Array;
  /** Reasons of the invalid slots, in slot order. */
  reasons: string[];
  /** Invalid slots written as phone numbers are, refused only for want of a phone region (needsPhoneRegion). */
  needingRegion: number;
}

/** Bytes of a hash as the service reads it: base64 text, 44 ASCII characters (normalizeHash, sha256Base64). */
export const HASH_BYTES = 44;

/** Hash `h` of prepared hashes as text: only for what needs a string (a state lookup, --emit-hash). */
export function hashText(hashes: Uint8Array, h: number): string {
  return Buffer.from(hashes.buffer, hashes.byteOffset + h * HASH_BYTES, HASH_BYTES).toString('latin1');
}

/**
 * Prepares every identifier cell of `rows`: the one place that decides, per cell, what is sent. The main
 * thread (no --threads) and the worker threads both call it, so the answer cannot depend on where it ran.
 */
export function prepareRows(rows: readonly InputRow[], columns: readonly IdentifierColumn[]): PreparedRows {
  const out = emptyPrepared(rows.length, columns.length);
  for (let r = 0; r < rows.length; r++) prepareRow(out, r * columns.length, rows[r], columns);
  return finished(out);
}

/**
 * prepareRows() for rows read one at a time (a piece's records, as the tokenizer gives them): each row is prepared
 * as it comes and can die at once, so a young collection during a piece copies the hashes made so far, not every
 * row of the piece.
 */
export class RowPreparer {
  private readonly out: Preparing;
  private rows = 0;

  /** `rowsAtMost`: no more rows will be added (the piece's line count, say); the arrays are made that long. */
  constructor(
    private readonly columns: readonly IdentifierColumn[],
    rowsAtMost: number,
  ) {
    this.out = emptyPrepared(rowsAtMost, columns.length);
  }

  add(row: InputRow): void {
    if (this.rows === this.out.rowCount) throw new Error(`RowPreparer: more than the ${this.out.rowCount} rows said`);
    prepareRow(this.out, this.rows * this.columns.length, row, this.columns);
    this.rows++;
  }

  /** The rows added, prepared; their status, phone and hash arrays are their own buffers (to be handed over). */
  finish(): PreparedRows {
    const out = finished(this.out);
    if (this.rows === out.rowCount) return out;
    const cells = this.rows * out.width;
    return { ...out, rowCount: this.rows, status: out.status.slice(0, cells), phone: out.phone.slice(0, cells) };
  }
}

/** Prepares the identifier cells of one row, whose first slot is `base`. */
function prepareRow(out: Preparing, base: number, row: InputRow, columns: readonly IdentifierColumn[]): void {
  const width = columns.length;
  const { status, reasons } = out;
  if (row.problem !== undefined && rowProblemInvalidates(row.problem)) {
    const reason = rowProblemReason(row.problem);
    for (let c = 0; c < width; c++) {
      status[base + c] = SLOT.invalid;
      reasons.push(reason);
    }
    return;
  }
  // a short row was padded: a missing identifier cell is reported as the row's problem, not as an empty value
  const present = row.problem?.kind === 'short_row' ? row.problem.cells : Number.POSITIVE_INFINITY;
  for (let c = 0; c < width; c++) {
    const column = columns[c];
    if (column.index >= present) {
      status[base + c] = SLOT.invalid;
      reasons.push(rowProblemReason(row.problem as RowProblem));
      continue;
    }
    prepareSlot(out, base + c, column, row.cells[column.index] ?? '', countryCellOf(column, row.cells));
  }
}

/**
 * prepareRows() for rows given as columns: `cells[i]` holds the cells of input column i, in row order, for every
 * column an identifier column reads, its country column included (the others may be absent). Rows read this way
 * have no row problems.
 */
export function prepareColumns(
  rowCount: number,
  cells: readonly (readonly string[] | undefined)[],
  columns: readonly IdentifierColumn[],
): PreparedRows {
  const width = columns.length;
  const out = emptyPrepared(rowCount, width);
  const given = (index: number): readonly string[] => {
    const text = cells[index];
    if (text === undefined) throw new Error(`the cells of input column ${index} were not given`);
    return text;
  };
  const texts = columns.map((column) => given(column.index));
  const countries = columns.map((column) =>
    column.phoneRegionIndex === undefined ? undefined : given(column.phoneRegionIndex),
  );
  // row after row, as prepareRows: the hashes and reasons go in slot order
  for (let r = 0; r < rowCount; r++)
    for (let c = 0; c < width; c++)
      prepareSlot(out, r * width + c, columns[c], texts[c][r] ?? '', countries[c]?.[r] ?? '');
  return finished(out);
}

/** Prepared rows being filled: their hash bytes have room for one hash per cell, `hashCount` of them written. */
interface Preparing extends PreparedRows {
  hashBytes: Buffer;
  hashCount: number;
}

function emptyPrepared(rowCount: number, width: number): Preparing {
  const cells = rowCount * width;
  // a buffer of its own (never the shared pool's): it is handed over whole
  const hashBytes = Buffer.allocUnsafeSlow(cells * HASH_BYTES);
  return {
    rowCount,
    width,
    status: new Uint8Array(cells),
    phone: new Uint8Array(cells),
    hashes: hashBytes,
    hashBytes,
    hashCount: 0,
    reasons: [],
    needingRegion: 0,
  };
}

/** The plain PreparedRows of a filled one: its hashes are the bytes written. */
function finished(out: Preparing): PreparedRows {
  return {
    rowCount: out.rowCount,
    width: out.width,
    status: out.status,
    phone: out.phone,
    hashes: new Uint8Array(out.hashBytes.buffer, 0, out.hashCount * HASH_BYTES),
    reasons: out.reasons,
    needingRegion: out.needingRegion,
  };
}

/** What one identifier cell is: the one decision, per cell, of what is sent. */
function prepareSlot(out: Preparing, slot: number, column: IdentifierColumn, cell: string, countryCell: string): void {
  // an empty cell (a row with an email but no phone, say) or a NULL written as `\N` has nothing to map: it is
  // not invalid data
  if (isMissingCell(column, cell)) {
    out.status[slot] = SLOT.missing;
    return;
  }
  const prepared = prepareCell(column, cell, countryCell);
  if (!prepared.ok) {
    out.status[slot] = SLOT.invalid;
    out.reasons.push(prepared.reason);
    if (needsPhoneRegion(cell, prepared)) out.needingRegion++;
    return;
  }
  // status stays SLOT.pending
  if (prepared.type === 'phone') out.phone[slot] = 1;
  const { hash } = prepared;
  if (hash.length !== HASH_BYTES) throw new Error(`prepareRows: a hash of ${hash.length} characters`);
  // base64 text is ASCII: a character is its byte (a loop costs less than a call to write per hash)
  const bytes = out.hashBytes;
  const at = out.hashCount++ * HASH_BYTES;
  for (let i = 0; i < HASH_BYTES; i++) bytes[at + i] = hash.charCodeAt(i);
}
