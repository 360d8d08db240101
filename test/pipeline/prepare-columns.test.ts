import { describe, expect, it } from 'vitest';
import { prepareColumns, prepareRows } from '../../src/pipeline/map/prepare-rows.js';
import { resolveIdentifierColumns } from '../../src/pipeline/table/identifier-columns.js';

const HEADER = ['id', 'email', 'notes', 'phone', 'email_hash'];
const HASH = 'ZfV+zHA0cxUGoPK1oxz3Nwm0M1ytJZqHbIjJ4Fns8U4=';
const rows = Array.from({ length: 300 }, (_, i) => [
  String(i),
  i % 7 === 0 ? '' : i % 11 === 0 ? 'not an email' : ` User.${i}+x@GMail.com `,
  'anything',
  i % 5 === 0 ? '' : i % 13 === 0 ? '617 555 0102' : `+1617555${String(i).padStart(4, '0')}`,
  i % 3 === 0 ? HASH : i % 17 === 0 ? 'zz' : '',
]);

describe('identifier cells prepared from columns', () => {
  it('are what prepareRows makes of the same rows: statuses, types, hashes and reasons in slot order', () => {
    const { columns } = resolveIdentifierColumns(HEADER, {
      emailCol: 'email',
      phoneCol: 'phone',
      emailHashCol: 'email_hash',
    });
    const byRows = prepareRows(
      rows.map((cells, r) => ({ line: r + 1, cells })),
      columns,
    );
    const cells = HEADER.map((_, c) => (c === 2 ? undefined : rows.map((row) => row[c])));
    const byColumns = prepareColumns(rows.length, cells, columns);
    expect(byColumns).toEqual(byRows);
    expect(byRows.hashes.length).toBeGreaterThan(0);
    expect(byRows.reasons.length).toBeGreaterThan(0);
  });

  it('refuses to prepare a column whose cells were not given', () => {
    const { columns } = resolveIdentifierColumns(HEADER, { emailCol: 'email' });
    expect(() => prepareColumns(1, [['1']], columns)).toThrow(/column 1/);
  });
});
