export * from './kinds.js';
export { normalizeEmail } from './email.js';
export { isNormalizedPhone, normalizePhone, parsePhoneRegion, PhoneRegionError } from './phone.js';
export type {
  NormalizedPhone,
  PhoneInvalidReason,
  PhoneRegion,
  UnknownCountryReason,
  UnknownPhoneRegion,
} from './phone.js';
export { phoneRegionOfRow, regionOfCountry } from './country-names.js';
export { sha256Base64, normalizeHash, isRawUidShape } from './hash.js';
export * from './prepare.js';
