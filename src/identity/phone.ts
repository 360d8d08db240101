/**
 * Phone cells to the E.164 form the service takes: as-is without a region, through libphonenumber with one.
 */
import type { CountryCode, PhoneNumber } from 'libphonenumber-js/max';
import { phoneLibrary } from './phone-library.js';

/**
 * The service does not normalize phones: it accepts `+` followed by 10 to 15 ASCII digits and nothing else
 * (uid2-operator InputUtil.isPhoneNumberNormalized). The value is hashed verbatim.
 */
export function isNormalizedPhone(input: string): boolean {
  const n = input.length;
  if (n < 11 || n > 16 || input.charCodeAt(0) !== 43) return false;
  for (let i = 1; i < n; i++) {
    const c = input.charCodeAt(i);
    if (c < 48 || c > 57) return false;
  }
  return true;
}

/**
 * Why a phone cell was not sent. They reach logs and output files, so they never hold the number: fixed texts, but
 * for UnknownCountryReason, which may name the row's country cell.
 */
export type PhoneInvalidReason =
  | 'invalid phone: must be + and 10 to 15 digits (E.164, no spaces or punctuation)'
  | 'invalid phone: not a phone number'
  | 'invalid phone: too short'
  | 'invalid phone: too long'
  | 'invalid phone: wrong number of digits for its country'
  | 'invalid phone: not a valid number for the given region'
  | 'invalid phone: not a valid number for its country calling code'
  | 'invalid phone: unknown country calling code'
  | 'invalid phone: has an extension; give the number without it'
  | 'invalid phone: valid, but its E.164 form is not the 10 to 15 digits the service accepts'
  | UnknownCountryReason;

/**
 * A row whose country cell names no country (see country-names.ts): the one reason that repeats a cell, the
 * country's, and only when it is written as a country's name is (letters, no digits).
 */
export type UnknownCountryReason =
  | `invalid phone: the row's country '${string}' is not an ISO 3166 code or a country name this tool knows`
  | "invalid phone: the row's country is not an ISO 3166 code or a country name this tool knows";

/** The region of a row whose country cell names none: its phones that need a region are invalid, not guessed. */
export interface UnknownPhoneRegion {
  readonly unknownCountry: UnknownCountryReason;
}

/** Digits with the separators people write phone numbers with, and nothing else. */
export const PHONE_WRITING = /^[0-9 ()./+-]*[0-9][0-9 ()./+-]*$/;

/** Today's check, word for word: the only reason there is when no region is given. */
export const INVALID_PHONE =
  'invalid phone: must be + and 10 to 15 digits (E.164, no spaces or punctuation)' satisfies PhoneInvalidReason;

export type NormalizedPhone = { ok: true; e164: string } | { ok: false; reason: PhoneInvalidReason };

/**
 * A country whose numbering plan reads national numbers: an ISO 3166 alpha-2 code, upper case, that the phone
 * metadata knows. Only parsePhoneRegion makes one, so a region that reaches normalizePhone is known good.
 */
export type PhoneRegion = CountryCode & { readonly __phoneRegion: true };

/** A phone region the user gave that is not one: a usage problem, reported in one line (exit code 2). */
export class PhoneRegionError extends Error {
  readonly exitCode = 2;
  readonly userMessage: string;
  constructor(message: string) {
    super(message);
    this.name = 'PhoneRegionError';
    this.userMessage = message;
  }
}

/** Checks a region as given by a user (flag, profile, library option); `us` is taken as `US`. */
export function parsePhoneRegion(text: string): PhoneRegion {
  const code = text.trim().toUpperCase();
  if (!/^[A-Z]{2}$/.test(code)) {
    throw new PhoneRegionError(
      `phone region '${text}' is not a two-letter ISO 3166 country code: give one such as US, GB, FR or DE`,
    );
  }
  if (!phoneLibrary().isSupportedCountry(code)) {
    throw new PhoneRegionError(
      `phone region '${code}' is not a country with a known phone numbering plan: give a two-letter ISO 3166 code such as US, GB, FR or DE`,
    );
  }
  return code as PhoneRegion;
}

const PARSE_REASONS: Record<string, PhoneInvalidReason> = {
  NOT_A_NUMBER: 'invalid phone: not a phone number',
  INVALID_COUNTRY: 'invalid phone: unknown country calling code',
  TOO_SHORT: 'invalid phone: too short',
  TOO_LONG: 'invalid phone: too long',
  INVALID_LENGTH: 'invalid phone: wrong number of digits for its country',
};

/**
 * One phone cell as the service should get it.
 * - A cell that already has the service's E.164 shape is taken unchanged, with or without a region: the region
 *   never adds a refusal the service would not make.
 * - Without a region nothing else is accepted (the service does not normalize, and neither does this).
 * - With a region, national and formatted numbers (`(617) 555-0102`, `0044 20 7946 0958`, `+49 (0)30 123456`)
 *   are read with the full libphonenumber metadata; the whole cell must be the number (no surrounding text),
 *   and it must be a valid number, not merely one of a possible length.
 * - With an UnknownPhoneRegion (a row's country cell that names none), a cell not already E.164 is invalid with
 *   that row's reason: reading it in some other country's plan could give a stranger's number.
 */
export function normalizePhone(cell: string, region?: PhoneRegion | UnknownPhoneRegion): NormalizedPhone {
  if (isNormalizedPhone(cell)) return { ok: true, e164: cell };
  if (region === undefined) return { ok: false, reason: INVALID_PHONE };
  if (typeof region !== 'string') return { ok: false, reason: region.unknownCountry };
  const lib = phoneLibrary();
  let parsed: PhoneNumber;
  try {
    parsed = lib.parsePhoneNumberWithError(cell, { defaultCountry: region, extract: false });
  } catch (err) {
    if (err instanceof lib.ParseError)
      return { ok: false, reason: PARSE_REASONS[err.message] ?? 'invalid phone: not a phone number' };
    throw err;
  }
  if (parsed.ext !== undefined)
    return { ok: false, reason: 'invalid phone: has an extension; give the number without it' };
  if (!parsed.isValid()) {
    // isPossible() is the length check of validatePhoneNumberLength, made on the number already parsed: the cell
    // is parsed a second time only when its length is wrong, to learn which way
    const length = parsed.isPossible() ? undefined : lib.validatePhoneNumberLength(cell, { defaultCountry: region });
    if (length !== undefined)
      return { ok: false, reason: PARSE_REASONS[length] ?? 'invalid phone: not a phone number' };
    // the length is possible, so the digits are wrong: for the region's plan, or for the one the cell named
    return {
      ok: false,
      reason:
        parsed.countryCallingCode === lib.getCountryCallingCode(region)
          ? 'invalid phone: not a valid number for the given region'
          : 'invalid phone: not a valid number for its country calling code',
    };
  }
  const e164 = parsed.number;
  if (!isNormalizedPhone(e164))
    return {
      ok: false,
      reason: 'invalid phone: valid, but its E.164 form is not the 10 to 15 digits the service accepts',
    };
  return { ok: true, e164 };
}
