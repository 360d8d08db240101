import type { DiiType } from '../../identity/index.js';
import { decodeStrictBase64 } from '../../protocol/index.js';
import type { IdentityScope } from '../contracts.js';
import { open, seal } from './aead.js';
import type { TokenKeys } from './keys.js';
import {
  OPERATOR_IDENTITY_LENGTH,
  PUBLISHER_IDENTITY_LENGTH,
  TOKEN_VERSION_V3,
  identityByte,
  parseIdentityByte,
  readMs,
  readOperatorIdentity,
  readPublisherIdentity,
  scopeBit,
  typeBit,
  typeFromBit,
  writeMs,
  writeOperatorIdentity,
  writePublisherIdentity,
  type OperatorIdentity,
  type PublisherIdentity,
} from './token-fields.js';

/**
 * Refresh tokens come in two layers (docs/wire-protocol.md §4.2, §9.2):
 * - the inner V3 token, 124 bytes / 168 base64 chars: identity byte ‖ 0x70 ‖ refresh key id(4) ‖
 *   GCM_refresh[ expires ‖ created ‖ operator(13) ‖ publisher(16) ‖ privacyBits(4) ‖ established ‖ type(1) ‖ F(32) ];
 * - the wrapper clients hold, 291 bytes / 388 base64 chars: scope nibble ‖ refresh key id(4) ‖
 *   GCM_refresh[ {"refresh_response_key":"…","refresh_token":"<inner>"} ].
 * F, not the raw UID, is inside, so a refresh after salt rotation yields the new raw UID.
 */

export const REFRESH_WRAPPER_LENGTH = 388;
export const INNER_REFRESH_TOKEN_LENGTH = 168;

export interface RefreshTokenContent {
  scope: IdentityScope;
  type: DiiType;
  /** refresh_expires, Unix ms. */
  expiresMs: number;
  createdMs: number;
  operator: OperatorIdentity;
  publisher: PublisherIdentity;
  privacyBits: number;
  establishedMs: number;
  /** First-level hash F, 32 bytes. */
  firstLevel: Buffer;
}

const HEADER_LENGTH = 6;
const PAYLOAD_LENGTH = 8 + 8 + OPERATOR_IDENTITY_LENGTH + PUBLISHER_IDENTITY_LENGTH + 4 + 8 + 1 + 32;

export function encodeRefreshToken(keys: TokenKeys, t: RefreshTokenContent): string {
  if (t.firstLevel.length !== 32) throw new Error(`First-level hash must be 32 bytes, got ${t.firstLevel.length}.`);
  const payload = Buffer.alloc(PAYLOAD_LENGTH);
  let o = writeMs(payload, 0, t.expiresMs);
  o = writeMs(payload, o, t.createdMs);
  o = writeOperatorIdentity(payload, o, t.operator);
  o = writePublisherIdentity(payload, o, t.publisher);
  payload.writeInt32BE(t.privacyBits, o);
  o = writeMs(payload, o + 4, t.establishedMs);
  payload.writeUInt8(typeBit(t.type), o);
  t.firstLevel.copy(payload, o + 1);

  const header = Buffer.alloc(HEADER_LENGTH);
  header.writeUInt8(identityByte(t.scope, t.type), 0);
  header.writeUInt8(TOKEN_VERSION_V3, 1);
  header.writeInt32BE(keys.refresh.id, 2);
  return Buffer.concat([header, seal(keys.refresh.secret, payload)]).toString('base64');
}

export type RefreshTokenDecoding =
  | { ok: true; token: RefreshTokenContent }
  /** The operator's "invalid token" cases: empty, not base64, unknown version or key, scope/type mismatch. */
  | { ok: false; reason: 'invalid' }
  /** A known key that does not open it: the operator's RuntimeException path (500). */
  | { ok: false; reason: 'decrypt-failed' };

export function decodeRefreshToken(keys: TokenKeys, text: string): RefreshTokenDecoding {
  const invalid = { ok: false, reason: 'invalid' } as const;
  const bytes = text.length === 0 ? null : decodeStrictBase64(text);
  if (bytes === null || bytes.length < HEADER_LENGTH || bytes[1] !== TOKEN_VERSION_V3) return invalid;
  const identity = parseIdentityByte(bytes[0]!);
  if (identity === null) return invalid;
  const key = keys.byId(bytes.readInt32BE(2));
  if (key === undefined) return invalid;

  const payload = open(key.secret, bytes.subarray(HEADER_LENGTH));
  if (payload === null) return { ok: false, reason: 'decrypt-failed' };
  if (payload.length !== PAYLOAD_LENGTH) return invalid;
  const typeAt = PAYLOAD_LENGTH - 33;
  if (typeFromBit(payload.readUInt8(typeAt)) !== identity.type) return invalid;

  return {
    ok: true,
    token: {
      ...identity,
      expiresMs: readMs(payload, 0),
      createdMs: readMs(payload, 8),
      operator: readOperatorIdentity(payload, 16),
      publisher: readPublisherIdentity(payload, 16 + OPERATOR_IDENTITY_LENGTH),
      privacyBits: payload.readInt32BE(16 + OPERATOR_IDENTITY_LENGTH + PUBLISHER_IDENTITY_LENGTH),
      establishedMs: readMs(payload, typeAt - 8),
      firstLevel: Buffer.from(payload.subarray(typeAt + 1)),
    },
  };
}

/** Builds what clients hold. Throws if the result is not 388 chars, as the operator does: clients dispatch on it. */
export function wrapRefreshToken(
  keys: TokenKeys,
  scope: IdentityScope,
  innerToken: string,
  responseKey: Buffer,
): string {
  const json = JSON.stringify({ refresh_response_key: responseKey.toString('base64'), refresh_token: innerToken });
  const header = Buffer.alloc(5);
  header.writeUInt8(scopeBit(scope) << 4, 0);
  header.writeInt32BE(keys.refresh.id, 1);
  const wrapper = Buffer.concat([header, seal(keys.refresh.secret, Buffer.from(json, 'utf8'))]).toString('base64');
  if (wrapper.length !== REFRESH_WRAPPER_LENGTH) {
    throw new Error(`Refresh token wrapper is ${wrapper.length} characters, must be ${REFRESH_WRAPPER_LENGTH}.`);
  }
  return wrapper;
}

export type RefreshWrapperOpening =
  | { ok: true; innerToken: string; responseKey: Buffer }
  | { ok: false; failure: 'not-base64' | 'decrypt-failed' | 'bad-format' }
  | { ok: false; failure: 'unknown-key'; keyId: number };

export function unwrapRefreshToken(keys: TokenKeys, wrapper: string): RefreshWrapperOpening {
  const bytes = decodeStrictBase64(wrapper);
  if (bytes === null) return { ok: false, failure: 'not-base64' };
  if (bytes.length < 5) return { ok: false, failure: 'decrypt-failed' };
  const keyId = bytes.readInt32BE(1);
  const key = keys.byId(keyId);
  if (key === undefined) return { ok: false, failure: 'unknown-key', keyId };
  const plain = open(key.secret, bytes.subarray(5));
  if (plain === null) return { ok: false, failure: 'decrypt-failed' };

  let parsed: unknown;
  try {
    parsed = JSON.parse(plain.toString('utf8'));
  } catch {
    return { ok: false, failure: 'bad-format' };
  }
  if (typeof parsed !== 'object' || parsed === null) return { ok: false, failure: 'bad-format' };
  const { refresh_response_key: keyText, refresh_token: innerToken } = parsed as Record<string, unknown>;
  if (typeof keyText !== 'string' || typeof innerToken !== 'string') return { ok: false, failure: 'bad-format' };
  const responseKey = decodeStrictBase64(keyText);
  if (responseKey === null || responseKey.length !== 32) return { ok: false, failure: 'bad-format' };
  return { ok: true, innerToken, responseKey };
}
