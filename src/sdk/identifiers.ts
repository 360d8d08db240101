/** Normalization and hashing of emails and phones for programs: the code the CLI's `hash` and `map` run. */
import {
  normalizePhone as normalizePhoneIn,
  prepareIdentifier,
  type IdentifierKind,
  type NormalizedPhone,
} from '../identity/index.js';
import { checkPhoneRegion } from './argument-checks.js';
import { ArgumentError } from './errors.js';

/**
 * A phone as the service takes it (E.164, `+` and 10 to 15 digits), or why it is not one. Without `region` only a
 * phone already in E.164 is accepted, as the service does; with one (ISO 3166 alpha-2, e.g. `'US'`), national and
 * formatted numbers such as `(415) 555-0100` are read in that country's numbering plan.
 * @throws ArgumentError when `cell` is not a string or `region` is not an ISO 3166 country with a numbering plan.
 */
export function normalizePhone(cell: string, region?: string): NormalizedPhone {
  if (typeof cell !== 'string') throw new ArgumentError(`normalizePhone cell must be a string, got a ${typeof cell}`);
  return normalizePhoneIn(cell, checkPhoneRegion(region, 'normalizePhone region'));
}

/**
 * The base64 SHA-256 the service is sent for an identifier: of the normalized email or E.164 phone, or a given hash
 * in base64 (hex is converted). Null when the value is not a valid identifier of that kind (`prepareIdentifier`
 * says why).
 * @throws ArgumentError for an unknown kind or a region that is not an ISO 3166 country.
 */
export function hashIdentifier(
  kind: IdentifierKind,
  value: string,
  options: { phoneRegion?: string } = {},
): string | null {
  if (kind !== 'email' && kind !== 'phone' && kind !== 'email_hash' && kind !== 'phone_hash')
    throw new ArgumentError(
      `hashIdentifier kind must be 'email', 'phone', 'email_hash' or 'phone_hash', got ${String(kind)}`,
    );
  if (typeof value !== 'string')
    throw new ArgumentError(`hashIdentifier value must be a string, got a ${typeof value}`);
  const phoneRegion = checkPhoneRegion(options.phoneRegion, 'hashIdentifier options.phoneRegion');
  const prepared = prepareIdentifier(kind, value, phoneRegion !== undefined ? { phoneRegion } : {});
  return prepared.ok ? prepared.hash : null;
}
