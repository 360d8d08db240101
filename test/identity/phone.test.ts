import { describe, expect, it } from 'vitest';
import {
  INVALID_PHONE,
  normalizePhone,
  parsePhoneRegion,
  PhoneRegionError,
  prepareAuto,
  prepareIdentifier,
  sha256Base64,
  type PhoneInvalidReason,
} from '../../src/identity/index.js';
import { seeded } from '../helpers/seeded-random.js';

// Each region: national and international ways people write one number, and the E.164 libphonenumber gives.
const FORMATS: Record<string, Array<[string, string]>> = {
  US: [
    ['(617) 555-0102', '+16175550102'],
    ['+1 617 555 0102', '+16175550102'],
    ['+1-617-555-0102', '+16175550102'],
    ['6175550102', '+16175550102'],
    ['617-555-0102', '+16175550102'],
    ['617.555.0102', '+16175550102'],
    ['617 555 0102', '+16175550102'],
    ['1 (617) 555-0102', '+16175550102'],
    ['1-617-555-0102', '+16175550102'],
    ['16175550102', '+16175550102'],
    ['+1 (617) 555-0102', '+16175550102'],
    ['  (617) 555-0102  ', '+16175550102'],
    ['(212) 555-0147', '+12125550147'],
    ['011 44 20 7946 0958', '+442079460958'],
    ['+44 20 7946 0958', '+442079460958'],
  ],
  GB: [
    ['020 7946 0958', '+442079460958'],
    ['(020) 7946 0958', '+442079460958'],
    ['02079460958', '+442079460958'],
    ['020-7946-0958', '+442079460958'],
    ['+44 20 7946 0958', '+442079460958'],
    ['+44 (0)20 7946 0958', '+442079460958'],
    ['+44-20-7946-0958', '+442079460958'],
    ['0044 20 7946 0958', '+442079460958'],
    ['00 44 20 7946 0958', '+442079460958'],
    ['07400 123456', '+447400123456'],
    ['07400123456', '+447400123456'],
    ['+44 7400 123456', '+447400123456'],
    ['0161 496 0000', '+441614960000'],
  ],
  FR: [
    ['01 23 45 67 89', '+33123456789'],
    ['0123456789', '+33123456789'],
    ['01.23.45.67.89', '+33123456789'],
    ['01-23-45-67-89', '+33123456789'],
    ['+33 1 23 45 67 89', '+33123456789'],
    ['+33 (0)1 23 45 67 89', '+33123456789'],
    ['0033 1 23 45 67 89', '+33123456789'],
    ['00 33 1 23 45 67 89', '+33123456789'],
    ['06 12 34 56 78', '+33612345678'],
    ['0612345678', '+33612345678'],
    ['+33 6 12 34 56 78', '+33612345678'],
    ['09 87 65 43 21', '+33987654321'],
  ],
  DE: [
    ['030 123456', '+4930123456'],
    ['030/123456', '+4930123456'],
    ['030-123456', '+4930123456'],
    ['(030) 123456', '+4930123456'],
    ['+49 30 123456', '+4930123456'],
    ['+49 (0)30 123456', '+4930123456'],
    ['0049 30 123456', '+4930123456'],
    ['030 12345678', '+493012345678'],
    ['0151 23456789', '+4915123456789'],
    ['0151-23456789', '+4915123456789'],
    ['+49 151 23456789', '+4915123456789'],
    ['089 1234567', '+49891234567'],
    ['0049 (0)89 1234567', '+49891234567'],
  ],
  IN: [
    ['98765 43210', '+919876543210'],
    ['9876543210', '+919876543210'],
    ['+91 98765 43210', '+919876543210'],
    ['+91-98765-43210', '+919876543210'],
    ['0 98765 43210', '+919876543210'],
    ['09876543210', '+919876543210'],
    ['0091 98765 43210', '+919876543210'],
    ['91 98765 43210', '+919876543210'],
    ['011 2345 6789', '+911123456789'],
    ['011-23456789', '+911123456789'],
    ['+91 11 2345 6789', '+911123456789'],
    ['022 2345 6789', '+912223456789'],
  ],
  BR: [
    ['(11) 91234-5678', '+5511912345678'],
    ['11 91234-5678', '+5511912345678'],
    ['11912345678', '+5511912345678'],
    ['011 91234-5678', '+5511912345678'],
    ['0 21 11 91234-5678', '+5511912345678'],
    ['+55 11 91234 5678', '+5511912345678'],
    ['+55 (11) 91234-5678', '+5511912345678'],
    ['0021 55 11 91234 5678', '+5511912345678'],
    ['(11) 3123-4567', '+551131234567'],
    ['11 3123-4567', '+551131234567'],
    ['+55 11 3123-4567', '+551131234567'],
    ['(21) 98765-4321', '+5521987654321'],
    ['021 98765-4321', '+5521987654321'],
  ],
  JP: [
    ['03-1234-5678', '+81312345678'],
    ['0312345678', '+81312345678'],
    ['03 1234 5678', '+81312345678'],
    ['(03) 1234-5678', '+81312345678'],
    ['+81 3 1234 5678', '+81312345678'],
    ['+81-3-1234-5678', '+81312345678'],
    ['+81 (0)3 1234 5678', '+81312345678'],
    ['010 81 3 1234 5678', '+81312345678'],
    ['０３－１２３４－５６７８', '+81312345678'],
    ['090-1234-5678', '+819012345678'],
    ['09012345678', '+819012345678'],
    ['+81 90 1234 5678', '+819012345678'],
    ['06-6123-4567', '+81661234567'],
  ],
};

const REFUSALS: Array<[string, string, PhoneInvalidReason]> = [
  ['US', '555-0102', 'invalid phone: too short'],
  ['US', '(617) 555-010', 'invalid phone: too short'],
  ['GB', '1', 'invalid phone: too short'],
  ['US', '617555010299999', 'invalid phone: too long'],
  ['GB', '0207946095812345', 'invalid phone: too long'],
  ['TR', '444 1 4444', 'invalid phone: wrong number of digits for its country'],
  ['US', '123-456-7890', 'invalid phone: not a valid number for the given region'],
  ['GB', '020 7946 095', 'invalid phone: not a valid number for the given region'],
  ['FR', '07 12 34 56 78', 'invalid phone: not a valid number for the given region'],
  ['GB', '+1 123 456 7890', 'invalid phone: not a valid number for its country calling code'],
  ['US', 'abc', 'invalid phone: not a phone number'],
  ['US', 'call 617 555 0102', 'invalid phone: not a phone number'],
  ['US', '+1 617 555 0102 abc', 'invalid phone: not a phone number'],
  ['US', '6175550102;', 'invalid phone: not a phone number'],
  ['US', '+999 123 456 789', 'invalid phone: unknown country calling code'],
  ['US', '+1 (617) 555-0102 ext. 12', 'invalid phone: has an extension; give the number without it'],
  ['US', '617-555-0102 x12', 'invalid phone: has an extension; give the number without it'],
  ['US', '+683 4002', 'invalid phone: valid, but its E.164 form is not the 10 to 15 digits the service accepts'],
  [
    'DE',
    '+49 30 1234567890123',
    'invalid phone: valid, but its E.164 form is not the 10 to 15 digits the service accepts',
  ],
];

describe('phones with a region: national and formatted numbers to E.164', () => {
  for (const [region, formats] of Object.entries(FORMATS)) {
    it(`${region}: ${formats.length} ways of writing`, () => {
      expect(formats.length).toBeGreaterThanOrEqual(12);
      const r = parsePhoneRegion(region);
      for (const [cell, e164] of formats) {
        expect({ cell, got: normalizePhone(cell, r) }).toEqual({ cell, got: { ok: true, e164 } });
        // without the region the same cell is refused exactly as before
        expect(normalizePhone(cell)).toEqual({ ok: false, reason: INVALID_PHONE });
      }
    });
  }

  it.each(REFUSALS)('%s %j is refused: %s', (region, cell, reason) => {
    expect(normalizePhone(cell, parsePhoneRegion(region))).toEqual({ ok: false, reason });
  });

  it('a refusal never carries the digits it was given', () => {
    for (const [region, cell] of REFUSALS) {
      const got = normalizePhone(cell, parsePhoneRegion(region));
      expect(got.ok).toBe(false);
      if (!got.ok) {
        expect(got.reason).not.toContain(cell);
        for (const run of cell.match(/\d{3,}/g) ?? []) expect(got.reason).not.toContain(run);
      }
    }
  });
});

describe('phones in E.164 shape', () => {
  it('are taken unchanged with any region, even where libphonenumber would call them invalid', () => {
    const random = seeded(13);
    const regions = ['US', 'GB', 'FR', 'DE', 'IN', 'BR', 'JP'].map(parsePhoneRegion);
    for (let i = 0; i < 2000; i++) {
      const digits = 10 + Math.floor(random() * 6);
      let cell = '+';
      for (let k = 0; k < digits; k++) cell += Math.floor(random() * 10);
      const region = regions[i % regions.length];
      expect(normalizePhone(cell, region)).toEqual({ ok: true, e164: cell });
      expect(normalizePhone(cell)).toEqual({ ok: true, e164: cell });
    }
    expect(normalizePhone('+11234567890', parsePhoneRegion('US'))).toEqual({ ok: true, e164: '+11234567890' });
  });

  it("without a region nothing else is accepted, with today's reason word for word", () => {
    expect(INVALID_PHONE).toBe('invalid phone: must be + and 10 to 15 digits (E.164, no spaces or punctuation)');
    for (const cell of ['(617) 555-0102', '+1 617 555 0102', '6175550102', ' +16175550102', '+123456789', 'abc']) {
      expect(normalizePhone(cell)).toEqual({ ok: false, reason: INVALID_PHONE });
      expect(prepareIdentifier('phone', cell)).toEqual({ ok: false, reason: INVALID_PHONE });
    }
  });
});

describe('phone regions', () => {
  it('takes a known ISO 3166 alpha-2 code in either case', () => {
    expect(parsePhoneRegion('US')).toBe('US');
    expect(parsePhoneRegion('gb')).toBe('GB');
    expect(parsePhoneRegion(' de ')).toBe('DE');
  });

  it.each([
    ['USA', /phone region 'USA' is not a two-letter ISO 3166 country code: give one such as US, GB/],
    ['', /phone region '' is not a two-letter ISO 3166 country code/],
    ['1', /is not a two-letter ISO 3166 country code/],
    ['XX', /phone region 'XX' is not a country with a known phone numbering plan: give a two-letter ISO 3166 code/],
    ['zz', /phone region 'ZZ' is not a country with a known phone numbering plan/],
  ])('refuses %j with a usage error', (text, message) => {
    let caught: unknown;
    try {
      parsePhoneRegion(text);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(PhoneRegionError);
    const err = caught as PhoneRegionError;
    expect(err.message).toMatch(message);
    expect(err.userMessage).toBe(err.message);
    expect(err.exitCode).toBe(2);
    expect(err.message).not.toContain('\n');
  });
});

describe('the region through prepare', () => {
  const us = { phoneRegion: parsePhoneRegion('US') };

  it('hashes the E.164 form, so every writing of one number gives one hash', () => {
    const expected = { ok: true, type: 'phone', hash: sha256Base64('+16175550102') };
    for (const [cell] of FORMATS.US.filter(([, e164]) => e164 === '+16175550102')) {
      expect(prepareIdentifier('phone', cell, us)).toEqual(expected);
    }
    expect(prepareIdentifier('phone', '+16175550102')).toEqual(expected);
  });

  it('passes the phone reason on', () => {
    expect(prepareIdentifier('phone', '555-0102', us)).toEqual({ ok: false, reason: 'invalid phone: too short' });
    expect(prepareIdentifier('phone', '', us)).toEqual({ ok: false, reason: 'empty' });
  });

  it('leaves emails and hashes alone', () => {
    expect(prepareIdentifier('email', 'User@Example.com', us)).toEqual(prepareIdentifier('email', 'User@Example.com'));
    const hex = 'a'.repeat(64);
    expect(prepareIdentifier('phone_hash', hex, us)).toEqual(prepareIdentifier('phone_hash', hex));
  });

  it('in auto mode, tries a cell that is no email and no hash as a national phone', () => {
    expect(prepareAuto('(617) 555-0102', undefined, us)).toEqual({
      ok: true,
      type: 'phone',
      hash: sha256Base64('+16175550102'),
    });
    expect(prepareAuto('+1 617 555 0102', undefined, us)).toEqual({
      ok: true,
      type: 'phone',
      hash: sha256Base64('+16175550102'),
    });
    expect(prepareAuto('555-0102', undefined, us)).toEqual({ ok: false, reason: 'invalid phone: too short' });
    expect(prepareAuto('hello', undefined, us)).toEqual({
      ok: false,
      reason: 'unrecognized identifier: not an email, an E.164 phone or a hash',
    });
    expect(prepareAuto('a@b.com', undefined, us)).toEqual(prepareAuto('a@b.com', undefined));
    // without a region auto mode is as before
    expect(prepareAuto('(617) 555-0102', undefined)).toEqual({
      ok: false,
      reason: 'unrecognized identifier: not an email, an E.164 phone or a hash',
    });
  });
});
