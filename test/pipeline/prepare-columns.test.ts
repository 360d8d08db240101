import { describe, expect, it } from 'vitest';
import { HASH_BYTES, hashText, prepareColumns, prepareRows } from '../../src/pipeline/map/prepare-rows.js';
import { resolveIdentifierColumns } from '../../src/pipeline/map/identifier-columns.js';
import { SLOT } from '../../src/pipeline/map/row-chunk.js';
import { sha256Base64, type PhoneRegion } from '../../src/identity/index.js';

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

  it('read the country column and NULL markers as prepareRows does (Parquet input, read by columns)', () => {
    const header = ['phone', 'Country', 'email'];
    const data = [
      ['(21) 2690-3311', 'Brazil', '\\N'],
      ['90685 36153', 'IN', 'a@example.com'],
      ['\\N', 'US', 'NULL'],
      ['(617) 555-0102', '', 'b@example.com'],
      ['(21) 2690-3311', 'Narnia', ''],
    ];
    const { columns } = resolveIdentifierColumns(header, { phoneCol: 'phone', emailCol: 'email' });
    const withCountry = columns.map((c) =>
      c.kind === 'phone'
        ? { ...c, phoneRegionIndex: 1, phoneRegion: 'US' as PhoneRegion }
        : { ...c, nullMarkers: ['NULL'] },
    );
    const byRows = prepareRows(
      data.map((cells, r) => ({ line: r + 1, cells })),
      withCountry,
    );
    const byColumns = prepareColumns(
      data.length,
      [0, 1, 2].map((c) => data.map((row) => row[c])),
      withCountry,
    );
    expect(byColumns).toEqual(byRows);
    // email, phone per row (the order resolveIdentifierColumns gives)
    expect([...byRows.status]).toEqual([
      ...[SLOT.missing, SLOT.pending],
      ...[SLOT.pending, SLOT.pending],
      ...[SLOT.missing, SLOT.missing],
      ...[SLOT.pending, SLOT.pending],
      ...[SLOT.missing, SLOT.invalid],
    ]);
    const texts = Array.from({ length: byRows.hashes.length / HASH_BYTES }, (_, h) => hashText(byRows.hashes, h));
    expect(texts.filter((_, i) => i !== 1 && i !== 3)).toEqual(
      ['+552126903311', '+919068536153', '+16175550102'].map(sha256Base64),
    );
  });

  it('refuses to prepare a column whose cells were not given', () => {
    const { columns } = resolveIdentifierColumns(HEADER, { emailCol: 'email' });
    expect(() => prepareColumns(1, [['1']], columns)).toThrow(/column 1/);
  });
});
