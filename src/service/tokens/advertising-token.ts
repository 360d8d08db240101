import type { DiiType } from '../../identity/index.js';
import type { IdentityScope } from '../contracts.js';
import { open, seal } from './aead.js';
import type { TokenKeys } from './keys.js';
import {
  OPERATOR_IDENTITY_LENGTH,
  PUBLISHER_IDENTITY_LENGTH,
  TOKEN_VERSION_V4,
  identityByte,
  parseIdentityByte,
  readMs,
  readOperatorIdentity,
  readPublisherIdentity,
  writeMs,
  writeOperatorIdentity,
  writePublisherIdentity,
  type OperatorIdentity,
  type PublisherIdentity,
} from './token-fields.js';

/**
 * The V4 advertising token (docs/wire-protocol.md §9.1):
 * identity byte ‖ 0x80 ‖ master key id(4) ‖ GCM_master[ expires ‖ created ‖ operator(13) ‖ site key id(4) ‖
 *   GCM_site[ publisher(16) ‖ privacyBits(4) ‖ established ‖ refreshed ‖ raw UID ] ], base64url without padding.
 * With a 32-byte raw UID that is 163 bytes, 218 characters.
 */

export interface AdvertisingTokenContent {
  scope: IdentityScope;
  type: DiiType;
  /** identity_expires, Unix ms. */
  expiresMs: number;
  createdMs: number;
  operator: OperatorIdentity;
  publisher: PublisherIdentity;
  privacyBits: number;
  establishedMs: number;
  refreshedMs: number;
  /** The raw UID's bytes (32 for a V2-format raw UID, 33 for V3/V4 formats). */
  rawUid: Buffer;
}

export type AdvertisingTokenDecoding =
  | { ok: true; token: AdvertisingTokenContent }
  /** `foreign-key`: well formed but made with a master or site key this service does not hold. */
  | { ok: false; reason: 'malformed' | 'foreign-key' | 'decrypt-failed' };

const HEADER_LENGTH = 6;
const MASTER_FIXED_LENGTH = 8 + 8 + OPERATOR_IDENTITY_LENGTH + 4;
const SITE_FIXED_LENGTH = PUBLISHER_IDENTITY_LENGTH + 4 + 8 + 8;
const BASE64URL = /^[A-Za-z0-9_-]+$/;

export function encodeAdvertisingToken(keys: TokenKeys, t: AdvertisingTokenContent): string {
  const sitePlain = Buffer.alloc(SITE_FIXED_LENGTH + t.rawUid.length);
  let o = writePublisherIdentity(sitePlain, 0, t.publisher);
  sitePlain.writeInt32BE(t.privacyBits, o);
  o = writeMs(sitePlain, o + 4, t.establishedMs);
  o = writeMs(sitePlain, o, t.refreshedMs);
  t.rawUid.copy(sitePlain, o);

  const siteSealed = seal(keys.site.secret, sitePlain);
  const masterPlain = Buffer.alloc(MASTER_FIXED_LENGTH + siteSealed.length);
  o = writeMs(masterPlain, 0, t.expiresMs);
  o = writeMs(masterPlain, o, t.createdMs);
  o = writeOperatorIdentity(masterPlain, o, t.operator);
  masterPlain.writeInt32BE(keys.site.id, o);
  siteSealed.copy(masterPlain, o + 4);

  const header = Buffer.alloc(HEADER_LENGTH);
  header.writeUInt8(identityByte(t.scope, t.type), 0);
  header.writeUInt8(TOKEN_VERSION_V4, 1);
  header.writeInt32BE(keys.master.id, 2);
  return Buffer.concat([header, seal(keys.master.secret, masterPlain)]).toString('base64url');
}

export function decodeAdvertisingToken(keys: TokenKeys, text: string): AdvertisingTokenDecoding {
  if (!BASE64URL.test(text) || text.length % 4 === 1) return { ok: false, reason: 'malformed' };
  const bytes = Buffer.from(text, 'base64url');
  if (bytes.length < HEADER_LENGTH || bytes[1] !== TOKEN_VERSION_V4) return { ok: false, reason: 'malformed' };
  const identity = parseIdentityByte(bytes[0]!);
  if (identity === null) return { ok: false, reason: 'malformed' };
  if (bytes.readInt32BE(2) !== keys.master.id) return { ok: false, reason: 'foreign-key' };

  const masterPlain = open(keys.master.secret, bytes.subarray(HEADER_LENGTH));
  if (masterPlain === null) return { ok: false, reason: 'decrypt-failed' };
  if (masterPlain.length < MASTER_FIXED_LENGTH) return { ok: false, reason: 'malformed' };
  const siteKeyId = masterPlain.readInt32BE(MASTER_FIXED_LENGTH - 4);
  if (siteKeyId !== keys.site.id) return { ok: false, reason: 'foreign-key' };

  const sitePlain = open(keys.site.secret, masterPlain.subarray(MASTER_FIXED_LENGTH));
  if (sitePlain === null) return { ok: false, reason: 'decrypt-failed' };
  if (sitePlain.length <= SITE_FIXED_LENGTH) return { ok: false, reason: 'malformed' };

  return {
    ok: true,
    token: {
      ...identity,
      expiresMs: readMs(masterPlain, 0),
      createdMs: readMs(masterPlain, 8),
      operator: readOperatorIdentity(masterPlain, 16),
      publisher: readPublisherIdentity(sitePlain, 0),
      privacyBits: sitePlain.readInt32BE(PUBLISHER_IDENTITY_LENGTH),
      establishedMs: readMs(sitePlain, PUBLISHER_IDENTITY_LENGTH + 4),
      refreshedMs: readMs(sitePlain, PUBLISHER_IDENTITY_LENGTH + 12),
      rawUid: Buffer.from(sitePlain.subarray(SITE_FIXED_LENGTH)),
    },
  };
}
