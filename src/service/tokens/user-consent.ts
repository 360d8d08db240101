/** The EUID operator's check of a token generate request's `tcf_consent_string` (docs/wire-protocol.md §5.1). */
import type { IdentityScope } from '../contracts.js';
import { readTcString } from './tc-string.js';

export type UserConsent = 'sufficient' | 'insufficient' | 'invalid';

/** The Trade Desk's vendor ID in the IAB Global Vendor List: the operator checks consent given to it. */
export const TCF_VENDOR_ID = 21;
/** Store/access information on a device, basic ads, ad profile, personalised ads, ad measurement, product development. */
export const REQUIRED_PURPOSES = [1, 2, 3, 4, 7, 10] as const;
/** Special feature 1: use precise geolocation data. */
export const REQUIRED_SPECIAL_FEATURE = 1;

export const MESSAGE_INVALID_CONSENT = 'User consent is invalid';
export const CONSENT_FIELD = 'tcf_consent_string';

/**
 * Whether a request lets the operator issue a token. Only EUID operators look at the field, and only when the request
 * has it: a key that is present but null, empty or not a string is as unreadable as a garbled string. A purpose
 * counts when it is granted on either legal basis the vendor holds: consent (vendor and purpose consent bits) or
 * legitimate interest (vendor and purpose legitimate-interest bits).
 */
export function checkUserConsent(scope: IdentityScope, request: Record<string, unknown>): UserConsent {
  if (scope !== 'EUID' || !Object.hasOwn(request, CONSENT_FIELD)) return 'sufficient';
  const text = request[CONSENT_FIELD];
  if (typeof text !== 'string' || text === '') return 'invalid';
  const reading = readTcString(text);
  if (!reading.ok) return 'invalid';
  const tc = reading.consent;
  const granted = new Set<number>();
  if (tc.vendorConsents.has(TCF_VENDOR_ID)) for (const p of tc.purposeConsents) granted.add(p);
  if (tc.vendorLegitimateInterests.has(TCF_VENDOR_ID)) for (const p of tc.purposeLegitimateInterests) granted.add(p);
  const purposes = REQUIRED_PURPOSES.every((p) => granted.has(p));
  return purposes && tc.specialFeatureOptIns.has(REQUIRED_SPECIAL_FEATURE) ? 'sufficient' : 'insufficient';
}
