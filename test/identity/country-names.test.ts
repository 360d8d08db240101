import { describe, expect, it } from 'vitest';
import { getCountries } from 'libphonenumber-js/max';
import { COUNTRY_NAMES, nameKey, phoneRegionOfRow, regionOfCountry } from '../../src/identity/country-names.js';
import {
  needsPhoneRegion,
  normalizePhone,
  parsePhoneRegion,
  prepareAuto,
  prepareIdentifier,
} from '../../src/identity/index.js';

describe('a row country cell to a phone region', () => {
  it('takes every ISO 3166 alpha-2 code the phone metadata knows, in any case', () => {
    for (const code of getCountries()) {
      expect(regionOfCountry(code)).toBe(code);
      expect(regionOfCountry(code.toLowerCase())).toBe(code);
      expect(regionOfCountry(` ${code[0]}${code[1].toLowerCase()} `)).toBe(code);
    }
  });

  it.each([
    ['United Kingdom', 'GB'],
    ['UK', 'GB'],
    ['u.k.', 'GB'],
    ['Great Britain', 'GB'],
    ['England', 'GB'],
    ['USA', 'US'],
    ['U.S.A.', 'US'],
    ['united states of america', 'US'],
    ['UNITED STATES', 'US'],
    ['Deutschland', 'DE'],
    ['Brasil', 'BR'],
    ['México', 'MX'],
    ['Mexico', 'MX'],
    ['España', 'ES'],
    ['Côte d’Ivoire', 'CI'],
    ["COTE D'IVOIRE", 'CI'],
    ['St. Lucia', 'LC'],
    ['Saint Lucia', 'LC'],
    ['Trinidad & Tobago', 'TT'],
    ['The Netherlands', 'NL'],
    ['Holland', 'NL'],
    ['Türkiye', 'TR'],
    ['Turkey', 'TR'],
    ['Korea, Republic of', 'KR'],
    ['  india  ', 'IN'],
  ])('%s is %s', (cell, code) => {
    expect(regionOfCountry(cell)).toBe(code);
  });

  it('names none for what is not a country', () => {
    for (const cell of ['Narnia', 'XX', 'ZZ', 'Europe', 'U', 'USSR', '123', 'a@example.com'])
      expect(regionOfCountry(cell), cell).toBeUndefined();
  });

  it('no two countries share a name, and every code of the table is one the phone metadata knows', () => {
    // the lookup is built from the table: a name listed under two codes would keep the last one silently
    const seen = new Map<string, string>();
    const known = new Set<string>(getCountries());
    for (const [code, names] of Object.entries(COUNTRY_NAMES)) {
      expect(known.has(code), code).toBe(true);
      for (const name of names) {
        const key = nameKey(name);
        expect(seen.get(key) ?? code, name).toBe(code);
        seen.set(key, code);
        expect(regionOfCountry(name), name).toBe(code);
      }
    }
    expect(nameKey('  The  Bahamas ')).toBe('bahamas');
  });

  it('an empty cell takes the fallback; an unknown one makes phones needing a region invalid, naming it', () => {
    const us = parsePhoneRegion('US');
    expect(phoneRegionOfRow('', us)).toBe('US');
    expect(phoneRegionOfRow('   ', undefined)).toBeUndefined();
    expect(phoneRegionOfRow('Brazil', us)).toBe('BR');
    const narnia = phoneRegionOfRow('Narnia', us);
    expect(normalizePhone('(21) 2690-3311', narnia)).toEqual({
      ok: false,
      reason: "invalid phone: the row's country 'Narnia' is not an ISO 3166 code or a country name this tool knows",
    });
    // an E.164 cell needs no region: taken as it is, as with any region
    expect(normalizePhone('+552126903311', narnia)).toEqual({ ok: true, e164: '+552126903311' });
    // a cell that may be a phone or an email put in the wrong column is not repeated
    for (const cell of ['+55 21 2690 3311', 'someone@example.com', 'x'.repeat(41)])
      expect(normalizePhone('(21) 2690-3311', phoneRegionOfRow(cell, us))).toEqual({
        ok: false,
        reason: "invalid phone: the row's country is not an ISO 3166 code or a country name this tool knows",
      });
  });
});

describe('needsPhoneRegion', () => {
  it('is a phone cell refused without a region, written as a phone number is', () => {
    const refusedAs = (kind: 'phone' | 'auto', cell: string) =>
      kind === 'phone' ? prepareIdentifier('phone', cell) : prepareAuto(cell, undefined);
    expect(needsPhoneRegion('(617) 555-0102', refusedAs('phone', '(617) 555-0102'))).toBe(true);
    expect(needsPhoneRegion('+1 617 555 0102', refusedAs('phone', '+1 617 555 0102'))).toBe(true);
    expect(needsPhoneRegion('020 7946 0958', refusedAs('auto', '020 7946 0958'))).toBe(true);
    // junk, too few digits, an email: no region would read them
    for (const cell of ['unknown', '555-01', 'n/a 12345678', 'a@b'])
      expect(needsPhoneRegion(cell, refusedAs('phone', cell)), cell).toBe(false);
    // refused with a region: the region was there
    const us = parsePhoneRegion('US');
    expect(needsPhoneRegion('123-456-7890', prepareIdentifier('phone', '123-456-7890', { phoneRegion: us }))).toBe(
      false,
    );
  });
});
