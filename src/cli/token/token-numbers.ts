/** The numbers the token commands show in their help and act on: request concurrency and refresh exit codes. */
import { EXIT } from '../shared/exit-codes.js';

/** Token calls are not batched like map: one request per row, so a few in flight keep a test audience quick. */
export const DEFAULT_TOKEN_CONCURRENCY = 8;
export const MAX_TOKEN_CONCURRENCY = 64;

/**
 * Exit codes of `token refresh` beyond the shared contract (0 ok, 1 failed, 2 usage, 4 auth refused): each thing
 * the service can say about a refresh token has its own, so a script can tell "opted out" from "generate again".
 */
export const REFRESH_EXIT = {
  /** The user opted out: discard the identity (log the user out). */
  optout: EXIT.optout,
  /** invalid_token, or a refresh token the service cannot read at all: generate a new identity. */
  invalidToken: EXIT.invalidToken,
  /** expired_token (or refused locally because refresh_expires has passed): generate a new identity. */
  expiredToken: EXIT.expiredToken,
  /** `error` to a caller without an API key: invalid or expired, the service does not say which. */
  refreshError: EXIT.refreshError,
} as const;
