/** Decrypted JSON of every endpoint the tool uses (docs/wire-protocol.md §5). */

export const PATHS = {
  tokenGenerate: '/v2/token/generate',
  tokenRefresh: '/v2/token/refresh',
  tokenValidate: '/v2/token/validate',
  mapV3: '/v3/identity/map',
  mapV2: '/v2/identity/map',
  buckets: '/v2/identity/buckets',
  optoutStatus: '/v2/optout/status',
} as const;

export type EndpointPath = (typeof PATHS)[keyof typeof PATHS];

/** Items per identity-map request and raw IDs per opt-out request. */
export const MAX_ITEMS_PER_REQUEST = 5000;
/** Body cap, bytes, as the operator's body handler enforces it (413 above it). */
export const MAX_BODY_BYTES = 1 << 20;
/** Recommended maximum of identity-map requests in flight against the public service. */
export const MAX_PARALLEL_MAP_REQUESTS = 20;

export type DiiInput = { email: string } | { email_hash: string } | { phone: string } | { phone_hash: string };

/** Spec §2.2. Times are Unix milliseconds. */
export interface TokenIdentity {
  advertising_token: string;
  refresh_token: string;
  identity_expires: number;
  refresh_from: number;
  refresh_expires: number;
  refresh_response_key: string;
}

/** The identity's fields by type, for the readers that check an identity field by field. */
export const IDENTITY_STRING_FIELDS = ['advertising_token', 'refresh_token', 'refresh_response_key'] as const;
export const IDENTITY_TIME_FIELDS = ['identity_expires', 'refresh_from', 'refresh_expires'] as const;

/** The identity out of an object whose fields were checked already; anything else it holds is left behind. */
export function pickTokenIdentity(checked: Record<string, unknown>): TokenIdentity {
  return {
    advertising_token: checked.advertising_token as string,
    refresh_token: checked.refresh_token as string,
    identity_expires: checked.identity_expires as number,
    refresh_from: checked.refresh_from as number,
    refresh_expires: checked.refresh_expires as number,
    refresh_response_key: checked.refresh_response_key as string,
  };
}

export type TokenResult = { status: 'success'; identity: TokenIdentity } | { status: 'optout' };

/** Spec §5.1: one identifier and, for EUID, the user's IAB TCF consent string. */
export type TokenGenerateRequest = DiiInput & { tcf_consent_string?: string };

/** Generate answers as refresh does, and on EUID also says the consent string does not allow a token. */
export type TokenGenerateResult = TokenResult | { status: 'insufficient_user_consent' };

export type TokenValidateRequest = DiiInput & { token: string };

/** v3 request: any subset of the four arrays; kinds may be mixed. */
export interface MapV3Request {
  email?: string[];
  email_hash?: string[];
  phone?: string[];
  phone_hash?: string[];
}

export interface MappedV3 {
  u: string;
  p: string | null;
  /** Unix seconds. */
  r: number;
}

export type UnmappedReason = 'optout' | 'invalid identifier';

export interface UnmappedV3 {
  e: UnmappedReason | string;
}

export type MapV3Item = MappedV3 | UnmappedV3;

export interface MapV3ResponseBody {
  email: MapV3Item[];
  email_hash: MapV3Item[];
  phone: MapV3Item[];
  phone_hash: MapV3Item[];
}

export function isMappedV3(item: MapV3Item): item is MappedV3 {
  return typeof (item as MappedV3).u === 'string';
}

/** v2 request: exactly one non-empty array. */
export type MapV2Request =
  | { email: string[] }
  | { email_hash: string[] }
  | { phone: string[] }
  | { phone_hash: string[] };

export interface MappedV2 {
  identifier: string;
  advertising_id: string;
  bucket_id: string;
}

export interface UnmappedV2 {
  identifier: string;
  reason: UnmappedReason | string;
}

export interface MapV2ResponseBody {
  mapped: MappedV2[];
  /** Absent when every input mapped. */
  unmapped?: UnmappedV2[];
}

export interface BucketsRequest {
  /** Zone-less UTC ISO local date-time, e.g. 2026-11-01T00:00:00. */
  since_timestamp: string;
}

export interface SaltBucket {
  bucket_id: string;
  /** yyyy-MM-ddTHH:mm:ss.SSS, UTC, no zone suffix. */
  last_updated: string;
}

export interface OptoutStatusRequest {
  advertising_ids: string[];
}

export interface OptedOutItem {
  advertising_id: string;
  /** Unix milliseconds. */
  opted_out_since: number;
}

export interface OptoutStatusResponseBody {
  opted_out: OptedOutItem[];
}

/** Every response JSON: `{status, body?, message?}`. */
export interface ResponseJson<B = unknown> {
  status: string;
  body?: B;
  message?: string;
}
