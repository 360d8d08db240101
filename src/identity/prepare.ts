import { normalizeEmail } from './email.js';
import { normalizeHash, sha256Base64 } from './hash.js';
import { diiTypeOf, type DiiType, type IdentifierKind } from './kinds.js';
import {
  INVALID_PHONE,
  normalizePhone,
  PHONE_WRITING,
  type PhoneInvalidReason,
  type PhoneRegion,
  type UnknownPhoneRegion,
} from './phone.js';

/**
 * Why a cell was not sent. Never contains the cell's value (one may name the row's country cell, see phone.ts):
 * these texts reach logs and output files.
 */
export type InvalidReason =
  | 'empty'
  | 'invalid email'
  | PhoneInvalidReason
  | 'invalid hash: must be 44-char base64 or 64-char hex of a SHA-256'
  | 'ambiguous hash: say whether it is an email or a phone hash (--type or a named column)'
  | 'unrecognized identifier: not an email, an E.164 phone or a hash';

export type Prepared = { ok: true; type: DiiType; hash: string } | { ok: false; reason: InvalidReason };

export { INVALID_PHONE } from './phone.js';
export const INVALID_HASH: InvalidReason = 'invalid hash: must be 44-char base64 or 64-char hex of a SHA-256';

/** How cells are read beyond what the service itself does. */
export interface PrepareOptions {
  /**
   * The country whose national numbers the phone cells are written in (from parsePhoneRegion). Without it a
   * phone must already be E.164, exactly as the service demands; with it, national and formatted numbers are
   * normalized to E.164 first. An UnknownPhoneRegion (a row whose country cell names none, phoneRegionOfRow)
   * makes such a phone invalid with that row's reason.
   */
  phoneRegion?: PhoneRegion | UnknownPhoneRegion | undefined;
}

/**
 * Turns one cell into what the service is sent: the DII type and the base64 SHA-256 of the normalized value.
 * Raw emails and phones never leave the machine; a cell that is invalid here would be invalid at the service.
 */
export function prepareIdentifier(kind: IdentifierKind, value: string, options?: PrepareOptions): Prepared {
  if (value.length === 0) return { ok: false, reason: 'empty' };
  switch (kind) {
    case 'email': {
      const normalized = normalizeEmail(value);
      return normalized === null
        ? { ok: false, reason: 'invalid email' }
        : { ok: true, type: 'email', hash: sha256Base64(normalized) };
    }
    case 'phone': {
      const phone = normalizePhone(value, options?.phoneRegion);
      return phone.ok
        ? { ok: true, type: 'phone', hash: sha256Base64(phone.e164) }
        : { ok: false, reason: phone.reason };
    }
    case 'email_hash':
    case 'phone_hash': {
      const h = normalizeHash(value);
      return h === null ? { ok: false, reason: INVALID_HASH } : { ok: true, type: diiTypeOf(kind), hash: h };
    }
  }
}

export const UNRECOGNIZED: InvalidReason = 'unrecognized identifier: not an email, an E.164 phone or a hash';

/**
 * A cell refused only for want of a phone region: invalid as E.164 (or unrecognized in an auto column), yet
 * written as a phone number is, which --phone-region would read. For the hint that says so, never for a result.
 */
export function needsPhoneRegion(cell: string, refused: Prepared): boolean {
  if (refused.ok || (refused.reason !== INVALID_PHONE && refused.reason !== UNRECOGNIZED)) return false;
  return looksLikePhoneNumber(cell);
}

/** Digits with the separators people write phone numbers with, and at least six digits: a number, not junk. */
function looksLikePhoneNumber(cell: string): boolean {
  if (!PHONE_WRITING.test(cell)) return false;
  let digits = 0;
  for (let i = 0; i < cell.length && digits < 6; i++) {
    const c = cell.charCodeAt(i);
    if (c >= 48 && c <= 57) digits++;
  }
  return digits >= 6;
}

/** What a single cell looks like, for `--type auto`. A hash cannot say whether it is of an email or a phone. */
export type DetectedKind = 'email' | 'phone' | 'hash' | null;

export function detectKind(value: string): DetectedKind {
  if (value.includes('@')) return 'email';
  if (value.charCodeAt(0) === 43) return 'phone';
  if (normalizeHash(value) !== null) return 'hash';
  return null;
}

/**
 * Prepares a cell of unknown kind. `hashType` says what a hash in this column stands for (from the column's
 * name or the user); without it a bare hash is reported as ambiguous rather than guessed. With a phone region,
 * a cell that is neither an email nor a hash is tried as a national phone number; one written only with the
 * characters of a phone number gets the phone's reason when it is not one.
 */
export function prepareAuto(value: string, hashType: DiiType | undefined, options?: PrepareOptions): Prepared {
  if (value.length === 0) return { ok: false, reason: 'empty' };
  switch (detectKind(value)) {
    case 'email':
      return prepareIdentifier('email', value);
    case 'phone':
      return prepareIdentifier('phone', value, options);
    case 'hash':
      if (hashType === undefined)
        return {
          ok: false,
          reason: 'ambiguous hash: say whether it is an email or a phone hash (--type or a named column)',
        };
      return prepareIdentifier(hashType === 'email' ? 'email_hash' : 'phone_hash', value);
    default: {
      if (options?.phoneRegion !== undefined) {
        const phone = prepareIdentifier('phone', value, options);
        if (phone.ok || PHONE_WRITING.test(value)) return phone;
      }
      return { ok: false, reason: UNRECOGNIZED };
    }
  }
}
