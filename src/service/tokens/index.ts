/**
 * The token part of the local identity service: /v2/token/generate, /v2/token/validate and /v2/token/refresh
 * answers (docs/wire-protocol.md §4, §5.1-5.2, §9), on top of the HTTP core's IdentityEngine and clock.
 */
export { createTokenHandlers, LOCAL_PUBLISHER, LOCAL_OPERATOR } from './handlers.js';
export { deriveTokenKeys, type TokenKey, type TokenKeys } from './keys.js';
export {
  encodeAdvertisingToken,
  decodeAdvertisingToken,
  type AdvertisingTokenContent,
  type AdvertisingTokenDecoding,
} from './advertising-token.js';
export {
  encodeRefreshToken,
  decodeRefreshToken,
  wrapRefreshToken,
  unwrapRefreshToken,
  REFRESH_WRAPPER_LENGTH,
  INNER_REFRESH_TOKEN_LENGTH,
  type RefreshTokenContent,
  type RefreshTokenDecoding,
  type RefreshWrapperOpening,
} from './refresh-token.js';
export type { OperatorIdentity, PublisherIdentity } from './token-fields.js';
