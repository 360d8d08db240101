import { describe, expect, it } from 'vitest';
import { parsePhoneRegion, sha256Base64 } from '../../src/identity/index.js';
import { prepareCell, type IdentifierColumn } from '../../src/pipeline/map/identifier-columns.js';

describe('a phone region on an identifier column', () => {
  const phone: IdentifierColumn = { name: 'phone', index: 1, kind: 'phone' };
  const gb: IdentifierColumn = { ...phone, phoneRegion: parsePhoneRegion('GB') };

  it('reads national numbers in that region; without it, E.164 only as before', () => {
    expect(prepareCell(gb, '020 7946 0958')).toEqual({ ok: true, type: 'phone', hash: sha256Base64('+442079460958') });
    expect(prepareCell(phone, '020 7946 0958')).toEqual({
      ok: false,
      reason: 'invalid phone: must be + and 10 to 15 digits (E.164, no spaces or punctuation)',
    });
    expect(prepareCell(gb, '+442079460958')).toEqual(prepareCell(phone, '+442079460958'));
  });

  it('applies to auto columns, and survives a structured clone (the way columns reach the row threads)', () => {
    const auto = structuredClone<IdentifierColumn>({
      name: 'contact',
      index: 0,
      kind: 'auto',
      phoneRegion: parsePhoneRegion('US'),
    });
    expect(prepareCell(auto, '(617) 555-0102')).toEqual({
      ok: true,
      type: 'phone',
      hash: sha256Base64('+16175550102'),
    });
    expect(prepareCell(auto, 'a@example.com').ok).toBe(true);
  });
});
