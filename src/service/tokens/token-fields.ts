import type { DiiType } from '../../identity/index.js';
import type { IdentityScope } from '../contracts.js';

/**
 * Fields shared by advertising and refresh tokens (docs/wire-protocol.md §9): the identity byte that starts every
 * V3/V4 token, and the operator and publisher identities both carry.
 */

export const TOKEN_VERSION_V3 = 0x70;
export const TOKEN_VERSION_V4 = 0x80;

/** Start of 2021-03-08T17:00Z: identities established before it are "deprecated" and refresh to optout. */
export const REFRESH_CUTOFF_MS = Date.UTC(2021, 2, 8, 17, 0, 0);

/** privacyBits bit 0 ("legacy"), which /v2/token/generate sets. */
export const PRIVACY_BIT_LEGACY = 1;

export function scopeBit(scope: IdentityScope): number {
  return scope === 'UID2' ? 0 : 1;
}

export function typeBit(type: DiiType): number {
  return type === 'email' ? 0 : 1;
}

export function typeFromBit(bit: number): DiiType | null {
  return bit === 0 ? 'email' : bit === 1 ? 'phone' : null;
}

/** byte0 of V3/V4 tokens: (scope<<4)|(type<<2)|3. The low bits 3 tell it apart from a V2 token's 0x02. */
export function identityByte(scope: IdentityScope, type: DiiType): number {
  return (scopeBit(scope) << 4) | (typeBit(type) << 2) | 3;
}

export function parseIdentityByte(byte: number): { scope: IdentityScope; type: DiiType } | null {
  // Only scope bit 4, type bit 2 and the low 3 may be set: anything else is no V3/V4 token of ours.
  if ((byte & 0b11) !== 3 || (byte & ~0b1_0111) !== 0) return null;
  return { scope: (byte >> 4) & 1 ? 'EUID' : 'UID2', type: (byte >> 2) & 1 ? 'phone' : 'email' };
}

/** Who issued the token: siteId 4 ‖ type 1 (Service = 1) ‖ version 4 ‖ keyId 4 = 13 bytes. */
export interface OperatorIdentity {
  siteId: number;
  type: number;
  version: number;
  keyId: number;
}

export const OPERATOR_IDENTITY_LENGTH = 13;

export function writeOperatorIdentity(buf: Buffer, offset: number, op: OperatorIdentity): number {
  buf.writeInt32BE(op.siteId, offset);
  buf.writeUInt8(op.type, offset + 4);
  buf.writeInt32BE(op.version, offset + 5);
  buf.writeInt32BE(op.keyId, offset + 9);
  return offset + OPERATOR_IDENTITY_LENGTH;
}

export function readOperatorIdentity(buf: Buffer, offset: number): OperatorIdentity {
  return {
    siteId: buf.readInt32BE(offset),
    type: buf.readUInt8(offset + 4),
    version: buf.readInt32BE(offset + 5),
    keyId: buf.readInt32BE(offset + 9),
  };
}

/** For whom the token was made: siteId 4 ‖ publisherId 8 ‖ clientKeyId 4 = 16 bytes. */
export interface PublisherIdentity {
  siteId: number;
  publisherId: number;
  clientKeyId: number;
}

export const PUBLISHER_IDENTITY_LENGTH = 16;

export function writePublisherIdentity(buf: Buffer, offset: number, pub: PublisherIdentity): number {
  buf.writeInt32BE(pub.siteId, offset);
  buf.writeBigInt64BE(BigInt(pub.publisherId), offset + 4);
  buf.writeInt32BE(pub.clientKeyId, offset + 12);
  return offset + PUBLISHER_IDENTITY_LENGTH;
}

export function readPublisherIdentity(buf: Buffer, offset: number): PublisherIdentity {
  return {
    siteId: buf.readInt32BE(offset),
    publisherId: Number(buf.readBigInt64BE(offset + 4)),
    clientKeyId: buf.readInt32BE(offset + 12),
  };
}

export function writeMs(buf: Buffer, offset: number, ms: number): number {
  buf.writeBigInt64BE(BigInt(ms), offset);
  return offset + 8;
}

export function readMs(buf: Buffer, offset: number): number {
  return Number(buf.readBigInt64BE(offset));
}
