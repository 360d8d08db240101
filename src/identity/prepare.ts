import { normalizeEmail } from './email.js';
import { normalizeHash, sha256Base64 } from './hash.js';
import { diiTypeOf, type DiiType, type IdentifierKind } from './kinds.js';
import { isNormalizedPhone } from './phone.js';

/** Why a cell was not sent. Never contains the cell's value: these texts reach logs and output files. */
export type InvalidReason =
  | 'empty'
  | 'invalid email'
  | 'invalid phone: must be + and 10 to 15 digits (E.164, no spaces or punctuation)'
  | 'invalid hash: must be 44-char base64 or 64-char hex of a SHA-256'
  | 'ambiguous hash: say whether it is an email or a phone hash (--type or a named column)'
  | 'unrecognized identifier: not an email, an E.164 phone or a hash';

export type Prepared =
  | { ok: true; type: DiiType; hash: string }
  | { ok: false; reason: InvalidReason };

export const INVALID_PHONE: InvalidReason = 'invalid phone: must be + and 10 to 15 digits (E.164, no spaces or punctuation)';
export const INVALID_HASH: InvalidReason = 'invalid hash: must be 44-char base64 or 64-char hex of a SHA-256';

/**
 * Turns one cell into what the service is sent: the DII type and the base64 SHA-256 of the normalized value.
 * Raw emails and phones never leave the machine; a cell that is invalid here would be invalid at the service.
 */
export function prepareIdentifier(kind: IdentifierKind, value: string): Prepared {
  if (value.length === 0) return { ok: false, reason: 'empty' };
  switch (kind) {
    case 'email': {
      const normalized = normalizeEmail(value);
      return normalized === null ? { ok: false, reason: 'invalid email' } : { ok: true, type: 'email', hash: sha256Base64(normalized) };
    }
    case 'phone':
      return isNormalizedPhone(value) ? { ok: true, type: 'phone', hash: sha256Base64(value) } : { ok: false, reason: INVALID_PHONE };
    case 'email_hash':
    case 'phone_hash': {
      const h = normalizeHash(value);
      return h === null ? { ok: false, reason: INVALID_HASH } : { ok: true, type: diiTypeOf(kind), hash: h };
    }
  }
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
 * name or the user); without it a bare hash is reported as ambiguous rather than guessed.
 */
export function prepareAuto(value: string, hashType: DiiType | undefined): Prepared {
  if (value.length === 0) return { ok: false, reason: 'empty' };
  switch (detectKind(value)) {
    case 'email':
      return prepareIdentifier('email', value);
    case 'phone':
      return prepareIdentifier('phone', value);
    case 'hash':
      if (hashType === undefined) return { ok: false, reason: 'ambiguous hash: say whether it is an email or a phone hash (--type or a named column)' };
      return prepareIdentifier(hashType === 'email' ? 'email_hash' : 'phone_hash', value);
    default:
      return { ok: false, reason: 'unrecognized identifier: not an email, an E.164 phone or a hash' };
  }
}
