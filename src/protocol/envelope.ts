import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/**
 * The encrypted envelopes of the identity service (docs/wire-protocol.md §2-§4):
 * request  = 0x01 ‖ IV(12) ‖ AES-256-GCM(ts_ms int64 BE ‖ nonce(8) ‖ JSON) ‖ tag(16)
 * response = IV(12) ‖ AES-256-GCM(ts_ms ‖ echoed nonce ‖ JSON) ‖ tag(16)          (no version byte)
 * refresh  = IV(12) ‖ AES-256-GCM(JSON) ‖ tag(16), keyed by the refresh_response_key (no timestamp, no nonce)
 */

export const ENVELOPE_VERSION = 1;
export const IV_LENGTH = 12;
export const TAG_LENGTH = 16;
export const NONCE_LENGTH = 8;
/** 1 + 12 + 16 + 8 + 8: the shortest request the service decodes. */
export const MIN_REQUEST_ENVELOPE_LENGTH = 45;

export class EnvelopeError extends Error {
  constructor(
    readonly code: 'decrypt-failed' | 'too-short' | 'nonce-mismatch' | 'bad-version',
    message: string,
  ) {
    super(message);
    this.name = 'EnvelopeError';
  }
}

/** A client secret or refresh_response_key: base64 of 32 bytes. Throws a message that never shows the value. */
export function decodeKey(base64Key: string, what = 'client secret'): Buffer {
  const key = Buffer.from(base64Key, 'base64');
  if (key.length !== 32 || !/^[A-Za-z0-9+/]+={0,2}$/.test(base64Key)) {
    throw new EnvelopeError(
      'decrypt-failed',
      `The ${what} is not a base64 encoding of 32 bytes (it should be 44 characters).`,
    );
  }
  return key;
}

function seal(key: Buffer, iv: Buffer, parts: Uint8Array[], prefix?: number): Buffer {
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  const chunks: Buffer[] = [];
  if (prefix !== undefined) chunks.push(Buffer.of(prefix));
  chunks.push(iv);
  for (const p of parts) chunks.push(cipher.update(p));
  chunks.push(cipher.final(), cipher.getAuthTag());
  return Buffer.concat(chunks);
}

function open(key: Buffer, data: Buffer, offset: number): Buffer {
  if (data.length < offset + IV_LENGTH + TAG_LENGTH) throw new EnvelopeError('too-short', 'Envelope too short.');
  const iv = data.subarray(offset, offset + IV_LENGTH);
  const tag = data.subarray(data.length - TAG_LENGTH);
  const decipher = createDecipheriv('aes-256-gcm', key, iv);
  decipher.setAuthTag(tag);
  try {
    return Buffer.concat([
      decipher.update(data.subarray(offset + IV_LENGTH, data.length - TAG_LENGTH)),
      decipher.final(),
    ]);
  } catch {
    throw new EnvelopeError('decrypt-failed', 'Decryption failed: wrong key or altered data.');
  }
}

function header(timestampMs: number, nonce: Buffer): Buffer {
  const h = Buffer.allocUnsafe(16);
  h.writeBigInt64BE(BigInt(timestampMs), 0);
  nonce.copy(h, 8);
  return h;
}

export interface SealedRequest {
  envelope: Buffer;
  nonce: Buffer;
}

/** Builds a request envelope. A retry must call this again: the timestamp has to be fresh. */
export function encryptRequest(
  key: Buffer,
  json: string | Uint8Array,
  options: { nowMs?: number; nonce?: Buffer; iv?: Buffer } = {},
): SealedRequest {
  const nonce = options.nonce ?? randomBytes(NONCE_LENGTH);
  const iv = options.iv ?? randomBytes(IV_LENGTH);
  const body = typeof json === 'string' ? Buffer.from(json, 'utf8') : json;
  const envelope = seal(key, iv, [header(options.nowMs ?? Date.now(), nonce), body], ENVELOPE_VERSION);
  return { envelope, nonce };
}

export interface OpenedRequest {
  timestampMs: number;
  nonce: Buffer;
  /** The JSON bytes after the 16-byte header; empty when the plaintext is exactly 16 bytes. */
  json: Buffer;
}

/** The service side of encryptRequest. Checks length and version before the key, as the operator does. */
export function decryptRequest(key: Buffer, envelope: Buffer): OpenedRequest {
  if (envelope.length < MIN_REQUEST_ENVELOPE_LENGTH) throw new EnvelopeError('too-short', 'Body too short.');
  if (envelope[0] !== ENVELOPE_VERSION)
    throw new EnvelopeError(
      'bad-version',
      `Invalid request envelope format version: received ${envelope[0]}, must be 1.`,
    );
  const plain = open(key, envelope, 1);
  if (plain.length < 16) throw new EnvelopeError('too-short', 'Body too short.');
  return {
    timestampMs: Number(plain.readBigInt64BE(0)),
    nonce: Buffer.from(plain.subarray(8, 16)),
    json: plain.subarray(16),
  };
}

export function encryptResponse(
  key: Buffer,
  nonce: Buffer,
  json: string | Uint8Array,
  options: { nowMs?: number; iv?: Buffer } = {},
): Buffer {
  const body = typeof json === 'string' ? Buffer.from(json, 'utf8') : json;
  return seal(key, options.iv ?? randomBytes(IV_LENGTH), [header(options.nowMs ?? Date.now(), nonce), body]);
}

export interface OpenedResponse {
  timestampMs: number;
  json: Buffer;
}

/** Decrypts a 200 answer and checks that it echoes the request's nonce. */
export function decryptResponse(key: Buffer, data: Buffer, expectedNonce: Buffer): OpenedResponse {
  const plain = open(key, data, 0);
  if (plain.length < 16) throw new EnvelopeError('too-short', 'Response envelope too short.');
  if (!plain.subarray(8, 16).equals(expectedNonce)) {
    throw new EnvelopeError(
      'nonce-mismatch',
      'The response does not echo the request nonce: it is not the answer to this request.',
    );
  }
  return { timestampMs: Number(plain.readBigInt64BE(0)), json: plain.subarray(16) };
}

/** Token refresh answers: bare JSON under the refresh_response_key that came with the presented token. */
export function encryptRefreshResponse(key: Buffer, json: string | Uint8Array, options: { iv?: Buffer } = {}): Buffer {
  const body = typeof json === 'string' ? Buffer.from(json, 'utf8') : json;
  return seal(key, options.iv ?? randomBytes(IV_LENGTH), [body]);
}

export function decryptRefreshResponse(key: Buffer, data: Buffer): Buffer {
  return open(key, data, 0);
}
