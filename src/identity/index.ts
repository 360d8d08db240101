export * from './kinds.js';
export { normalizeEmail } from './email.js';
export { isNormalizedPhone, normalizePhone, parsePhoneRegion, PhoneRegionError } from './phone.js';
export type { NormalizedPhone, PhoneInvalidReason, PhoneRegion } from './phone.js';
export { sha256Base64, normalizeHash, isRawUidShape } from './hash.js';
export * from './prepare.js';
