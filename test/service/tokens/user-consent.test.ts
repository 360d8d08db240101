import { TCString } from '@iabtcf/core';
import { describe, expect, it } from 'vitest';
import type { IdentityScope } from '../../../src/service/contracts.js';
import { createTokenHandlers } from '../../../src/service/tokens/index.js';
import { readTcString } from '../../../src/service/tokens/tc-string.js';
import {
  FULL_GRANTS as FULL,
  type Grants,
  PYTHON_CLIENT_GRANTING_TC_STRING,
  PYTHON_CLIENT_TC_STRING as PYTHON_CLIENT_STRING,
  tcString,
} from '../../helpers/tc-strings.js';
import { FakeClock, FakeEngine, LIFETIMES, SEED, START_MS } from './fakes.js';

function generate(scope: IdentityScope, request: Record<string, unknown>) {
  const handlers = createTokenHandlers({
    engine: new FakeEngine(scope),
    clock: new FakeClock(START_MS),
    lifetimes: LIFETIMES,
    seed: SEED,
  });
  return handlers.generate(request);
}

const USER = { email: 'consent-user@example.com' };
const INSUFFICIENT = { http: 200, json: { status: 'insufficient_user_consent' } };
const INVALID = { http: 400, json: { status: 'client_error', message: 'User consent is invalid' } };

describe('EUID token generate reads tcf_consent_string', () => {
  it("refuses the Python client's string: purpose 1 is not granted", () => {
    expect(generate('EUID', { ...USER, tcf_consent_string: PYTHON_CLIENT_STRING })).toEqual(INSUFFICIENT);
  });

  it("issues a token for the Python client's granting string (its CMP ID of 1 read as the operator reads it)", () => {
    const result = generate('EUID', { ...USER, tcf_consent_string: PYTHON_CLIENT_GRANTING_TC_STRING });
    expect(result.json.status).toBe('success');
    const optedOut = generate('EUID', {
      email: 'optout@example.com',
      tcf_consent_string: PYTHON_CLIENT_GRANTING_TC_STRING,
    });
    expect(optedOut.json).toEqual({ status: 'optout' });
  });

  it('issues a token when vendor 21 has purposes 1, 2, 3, 4, 7, 10 and special feature 1', () => {
    const result = generate('EUID', { ...USER, tcf_consent_string: tcString(FULL) });
    expect(result.http).toBe(200);
    expect(result.json.status).toBe('success');
  });

  it('counts purposes granted by legitimate interest to a vendor holding it', () => {
    const split: Grants = {
      vendorConsents: [21],
      vendorLegitimateInterests: [21],
      purposeConsents: [1, 3, 4],
      purposeLegitimateInterests: [2, 7, 10],
      specialFeatureOptins: [1],
    };
    expect(generate('EUID', { ...USER, tcf_consent_string: tcString(split) }).json.status).toBe('success');
    // the same purposes, but vendor 21 holds no legitimate interest: 2, 7 and 10 are missing
    const noLi = { ...split, vendorLegitimateInterests: [] };
    expect(generate('EUID', { ...USER, tcf_consent_string: tcString(noLi) })).toEqual(INSUFFICIENT);
  });

  it.each<[string, Grants]>([
    ['a purpose missing', { ...FULL, purposeConsents: [1, 2, 3, 7, 10] }],
    ['no special feature 1', { ...FULL, specialFeatureOptins: [2] }],
    ['another vendor only', { ...FULL, vendorConsents: [20, 22, 755] }],
  ])('answers insufficient_user_consent with %s', (_name, grants) => {
    expect(generate('EUID', { ...USER, tcf_consent_string: tcString(grants) })).toEqual(INSUFFICIENT);
  });

  it.each<[string, unknown]>([
    ['garbled text', 'not a consent string'],
    ['empty', ''],
    ['null', null],
    ['a number', 42],
    ['cut short', tcString(FULL).slice(0, 20)],
    ['version 3', `D${tcString(FULL).slice(1)}`],
  ])('refuses %s with 400 "User consent is invalid"', (_name, value) => {
    expect(generate('EUID', { ...USER, tcf_consent_string: value })).toEqual(INVALID);
  });

  it('checks the identifier first, and consent before opt-out', () => {
    expect(generate('EUID', { email: 'no-at-sign', tcf_consent_string: 'garbled' }).json).toEqual({
      status: 'client_error',
      message: 'Invalid Identifier',
    });
    expect(generate('EUID', { email: 'optout@example.com', tcf_consent_string: PYTHON_CLIENT_STRING })).toEqual(
      INSUFFICIENT,
    );
    expect(generate('EUID', { email: 'optout@example.com', tcf_consent_string: tcString(FULL) }).json).toEqual({
      status: 'optout',
    });
  });

  it('issues a token when the field is absent', () => {
    expect(generate('EUID', USER).json.status).toBe('success');
  });
});

describe('UID2 token generate ignores tcf_consent_string', () => {
  it.each([PYTHON_CLIENT_STRING, 'garbled', ''])('issues a token whatever the string (%s)', (value) => {
    expect(generate('UID2', { ...USER, tcf_consent_string: value }).json.status).toBe('success');
  });
});

describe('readTcString agrees with the IAB encoder', () => {
  const ids = (set: ReadonlySet<number>) => [...set].sort((a, b) => a - b);
  it.each<[string, Grants]>([
    ['a few vendors (bit field)', { ...FULL, vendorLegitimateInterests: [2, 21, 40] }],
    // long runs make the encoder choose range entries
    [
      'vendor ranges',
      {
        vendorConsents: [...Array.from({ length: 300 }, (_, i) => i + 10), 700, 1500],
        vendorLegitimateInterests: Array.from({ length: 50 }, (_, i) => i + 2000),
        purposeConsents: [1, 5, 24],
        purposeLegitimateInterests: [2, 9],
        specialFeatureOptins: [1, 2],
      },
    ],
    ['nothing granted', {}],
  ])('%s', (_name, grants) => {
    const text = tcString(grants);
    const reading = readTcString(text);
    if (!reading.ok) throw new Error(reading.problem);
    const oracle = TCString.decode(text);
    const setOf = (vector: { forEach(cb: (value: boolean, id: number) => void): void }) => {
      const out: number[] = [];
      vector.forEach((value, id) => {
        if (value) out.push(id);
      });
      return out.sort((a, b) => a - b);
    };
    expect(ids(reading.consent.vendorConsents)).toEqual(setOf(oracle.vendorConsents));
    expect(ids(reading.consent.vendorLegitimateInterests)).toEqual(setOf(oracle.vendorLegitimateInterests));
    expect(ids(reading.consent.purposeConsents)).toEqual(setOf(oracle.purposeConsents));
    expect(ids(reading.consent.purposeLegitimateInterests)).toEqual(setOf(oracle.purposeLegitimateInterests));
    expect(ids(reading.consent.specialFeatureOptIns)).toEqual(setOf(oracle.specialFeatureOptins));
    expect(ids(reading.consent.vendorConsents)).toEqual([...(grants.vendorConsents ?? [])].sort((a, b) => a - b));
  });

  it("reads the Python client's string, which the IAB's JavaScript decoder refuses for its CMP ID of 1", () => {
    expect(() => TCString.decode(PYTHON_CLIENT_STRING)).toThrow(/cmpId/);
    const reading = readTcString(PYTHON_CLIENT_STRING);
    if (!reading.ok) throw new Error(reading.problem);
    expect(reading.consent.version).toBe(2);
    // vendor 21 holds consent and legitimate interest, but purpose 1 is granted on neither basis
    expect([...reading.consent.vendorConsents]).toEqual([21]);
    expect([...reading.consent.purposeConsents]).toEqual([3, 4]);
    expect([...reading.consent.purposeLegitimateInterests]).toEqual([2, 7, 10]);
    expect([...reading.consent.specialFeatureOptIns]).toEqual([1]);
  });
});
