/** A one-column CSV whose first line is an email or a phone, not a header: read as headerless, that line a row. */
import { prepareIdentifier } from '../../identity/index.js';
import type { ColumnFlags, IdentifierColumn } from '../map/identifier-columns.js';
import type { InputRow, TableSource } from '../io/table.js';
import type { CsvPieceSource } from '../io/csv/piece-source.js';
import { isPieceSource, type TableInput } from '../threads/table-input.js';

/**
 * Whether an input read so may be a headerless one-column file: a CSV (its format resolved) read with a header
 * line, and no identifier column named by a flag (a named column means the user knows the header).
 */
export function mayBeHeaderless(
  flags: ColumnFlags,
  read: { format: 'csv' | 'jsonl' | 'parquet'; header?: boolean | undefined },
): boolean {
  const named = [flags.emailCol, flags.phoneCol, flags.emailHashCol, flags.phoneHashCol].some(
    (v) => v !== undefined && v.length > 0,
  );
  return !named && flags.col === undefined && read.header !== false && read.format === 'csv';
}

/** The name a headerless file's only column gets, as with --no-header. */
const ONLY_COLUMN = 'col1';

/**
 * What the only header cell of a CSV input is, when it is a valid email or E.164 phone rather than a name;
 * undefined for any other header. Only a whole value counts: `email` or `Phone #` are names.
 */
export function valueInHeader(header: readonly string[]): 'email' | 'phone' | undefined {
  if (header.length !== 1) return undefined;
  const cell = header[0];
  if (prepareIdentifier('email', cell).ok) return 'email';
  if (prepareIdentifier('phone', cell).ok) return 'phone';
  return undefined;
}

/** An input read as headerless by readAsHeaderless: it knows its identifier column. */
type HeaderlessInput = TableInput & { readonly headerlessColumns: IdentifierColumn[] };

/** The identifier column of an input readAsHeaderless made, or undefined for any other input. */
export function headerlessColumns(input: TableInput): IdentifierColumn[] | undefined {
  return 'headerlessColumns' in input ? (input as HeaderlessInput).headerlessColumns : undefined;
}

/**
 * When `input` (a CSV read with a header, no column named by a flag) is one column whose header is an email or a
 * phone, the same input read as headerless: the header cell becomes the first row, exactly as it was read, the
 * column is named col1, and a note on its notes says so. Otherwise the input as it was.
 */
export function readAsHeaderless(input: TableInput): TableInput {
  const kind = valueInHeader(input.header);
  if (kind === undefined) return input;
  const first = input.header[0];
  const note =
    `the first line of ${input.name} is ${kind === 'email' ? 'an email' : 'a phone'}, not a header: reading it as a file of ${kind}s ` +
    `without a header (column ${ONLY_COLUMN}); to say so yourself: --no-header --${kind}-col ${ONLY_COLUMN}`;
  const read = isPieceSource(input) ? withFirstPiece(input, first, note) : withFirstRow(input, first, note);
  return Object.assign(read, { headerlessColumns: [{ name: ONLY_COLUMN, index: 0, kind }] });
}

/** What both kinds of input tell besides their rows, the header renamed. */
function infoOf(source: TableInput, note: string): Omit<TableSource, 'rows'> {
  return {
    header: [ONLY_COLUMN],
    notes: [...source.notes, note],
    name: source.name,
    totalBytes: source.totalBytes,
    bytesRead: () => source.bytesRead(),
    problems: () => source.problems(),
  };
}

function withFirstRow(source: TableSource, cell: string, note: string): TableSource {
  return {
    ...infoOf(source, note),
    async *rows(): AsyncGenerator<InputRow[]> {
      yield [{ line: 1, cells: [cell] }];
      yield* source.rows();
    },
  };
}

/**
 * The header cell as a piece of its own, ahead of the source's pieces: one record of one field, quoted as CSV
 * quotes it when it holds a quote or a line break (with one column, the delimiter cannot be in it).
 */
function withFirstPiece(source: CsvPieceSource, cell: string, note: string): CsvPieceSource {
  const field = /["\r\n]/.test(cell) ? `"${cell.replace(/"/g, '""')}"` : cell;
  const bytes = Buffer.from(`${field}\n`, source.settings.encoding === 'latin1' ? 'latin1' : 'utf8');
  return {
    ...infoOf(source, note),
    settings: source.settings,
    width: source.width,
    addProblems: (more) => source.addProblems(more),
    async *pieces() {
      yield { bytes, startLine: 1, startOffset: 0 };
      yield* source.pieces();
    },
  };
}
