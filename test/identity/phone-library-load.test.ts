import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { normalizeEmail, normalizePhone, parsePhoneRegion, regionOfCountry } from '../../src/identity/index.js';

// The phone metadata is loaded when a phone first needs it, not when the identity code is imported: most runs
// never read a national number. Each test file runs in a process of its own, so the module cache shows what
// the code here loaded; the tests run in order.
const phoneLibraryLoaded = () =>
  Object.keys(createRequire(import.meta.url).cache).some((path) => path.includes('libphonenumber-js'));

describe('when the phone library is loaded', () => {
  it('not by importing the identity code, nor by emails, E.164 phones or two-letter country codes', () => {
    expect(phoneLibraryLoaded()).toBe(false);
    expect(normalizeEmail('Someone@Example.com')).toBe('someone@example.com');
    expect(normalizePhone('+16175550102')).toEqual({ ok: true, e164: '+16175550102' });
    expect(normalizePhone('617 555 0102')).toMatchObject({ ok: false });
    expect(phoneLibraryLoaded()).toBe(false);
  });

  it('by the first national number read with a region, which it reads', () => {
    const region = parsePhoneRegion('us');
    expect(phoneLibraryLoaded()).toBe(true);
    expect(normalizePhone('(617) 555-0102', region)).toEqual({ ok: true, e164: '+16175550102' });
    expect(normalizePhone('617 555 01', region)).toEqual({ ok: false, reason: 'invalid phone: too short' });
    expect(regionOfCountry('United Kingdom')).toBe('GB');
    expect(regionOfCountry('fr')).toBe('FR');
  });
});
