import { describe, expect, it } from 'vitest';
import { fitRow } from '../../src/pipeline/io/csv/fit-row.js';
import { parseCsvPiece, readCsvRecords, recordsAtMost } from '../../src/pipeline/io/csv/csv-records.js';
import { resolveIdentifierColumns } from '../../src/pipeline/map/identifier-columns.js';
import { prepareRows, RowPreparer } from '../../src/pipeline/map/prepare-rows.js';

const HEADER = ['id', 'email', 'notes', 'phone'];
const CSV = { delimiter: ',', encoding: 'utf8' as const };
/** Rows of each kind a piece holds: plain, short, long, a trailing comma, quoted line breaks, empty lines, CR and CRLF ends. */
const TEXT = [
  '1, A.b+x@GMail.com ,n,+16175550101',
  '2,not an email,n,617 555 0102',
  '3,c@example.com',
  '4,d@example.com,n,+16175550104,extra',
  '5,e@example.com,n,+16175550105,',
  '6,"f@example.com","two\nlines",+16175550106',
  '',
  '7,,n,',
]
  .join('\n')
  .concat('\r8,g@example.com,n,+16175550108\r\n9,h@example.com,n,+16175550109\n');

describe('rows prepared one at a time as they are read', () => {
  const { columns } = resolveIdentifierColumns(HEADER, { emailCol: 'email', phoneCol: 'phone' });
  const piece = { bytes: Buffer.from(TEXT, 'utf8'), startLine: 2 };

  it('are what prepareRows makes of the parsed piece: statuses, types, hashes, reasons', () => {
    const rows = parseCsvPiece(piece, CSV, HEADER.length, 'in.csv', { shortRows: 0, longRows: 0, extraKeys: 0 });
    const byPiece = prepareRows(rows, columns);
    const counts = { shortRows: 0, longRows: 0, extraKeys: 0 };
    const preparer = new RowPreparer(columns, recordsAtMost(piece.bytes));
    readCsvRecords(piece, CSV, 'in.csv', (line, cells) => preparer.add(fitRow(line, cells, HEADER.length, counts)));
    const byRow = preparer.finish();
    expect(byRow).toEqual(byPiece);
    expect(byRow.rowCount).toBe(9);
    expect(counts).toEqual({ shortRows: 1, longRows: 1, extraKeys: 0 });
    // handed over whole: the arrays are exactly the rows' slots
    expect(byRow.status.buffer.byteLength).toBe(9 * columns.length);
    expect(byRow.phone.buffer.byteLength).toBe(9 * columns.length);
    expect(byRow.hashes.length).toBeGreaterThan(0);
    expect(byRow.reasons.length).toBeGreaterThan(0);
  });

  it('refuse more rows than they were told of', () => {
    const preparer = new RowPreparer(columns, 1);
    preparer.add({ line: 1, cells: ['1', 'a@example.com', '', ''] });
    expect(() => preparer.add({ line: 2, cells: ['2', 'b@example.com', '', ''] })).toThrow(/more than the 1 rows/);
  });

  it('count at most one record more than the line breaks', () => {
    expect(recordsAtMost(Buffer.from(''))).toBe(1);
    expect(recordsAtMost(Buffer.from('a\nb\r\nc\rd'))).toBe(5);
    expect(recordsAtMost(piece.bytes)).toBeGreaterThanOrEqual(9);
  });
});
