/** A v3 map request of hashes held as its JSON bytes, written from the hashes' bytes without a string per hash. */
import type { MapV3Request } from './wire.js';

/** Characters of a hash as the service reads it: base64 SHA-256, 44 ASCII characters. */
const HASH_CHARS = 44;
/** `"<hash>",`: an item never needs escaping (base64 text), so its bytes are its characters. */
const ITEM_BYTES = HASH_CHARS + 3;
const QUOTE = 0x22;
const COMMA = 0x2c;

/**
 * A v3 map request of email and phone hashes, made from the hashes' text bytes (HASH_CHARS each, one after
 * another): its JSON is written once, byte for byte what JSON.stringify makes of the same request, and sent as
 * it is (requestJson). Read as a MapV3Request (a fake service, the v2 adapter, a state commit), its arrays are
 * made from those bytes when first asked for.
 */
export class MapV3HashRequest implements MapV3Request {
  readonly json: Buffer;
  readonly emailCount: number;
  readonly phoneCount: number;
  /** Where each array's first hash starts in json (-1: the array is left out). */
  private readonly emailAt: number;
  private readonly phoneAt: number;
  private emailTexts: string[] | undefined;
  private phoneTexts: string[] | undefined;

  /** `emailHashes`, `phoneHashes`: the hashes' bytes (at least HASH_CHARS times the count); an empty array is left out. */
  constructor(emailHashes: Uint8Array, emailCount: number, phoneHashes: Uint8Array, phoneCount: number) {
    this.emailCount = emailCount;
    this.phoneCount = phoneCount;
    const parts = (emailCount > 0 ? 1 : 0) + (phoneCount > 0 ? 1 : 0);
    // `{` `"email_hash":[` items `]` (`,` between the arrays) `}`
    const size = 2 + Math.max(0, parts - 1) + parts * 15 + (emailCount + phoneCount) * ITEM_BYTES - parts;
    const json = Buffer.allocUnsafe(size);
    let at = json.write('{', 0, 'latin1');
    this.emailAt = -1;
    this.phoneAt = -1;
    if (emailCount > 0) {
      at += json.write('"email_hash":[', at, 'latin1');
      this.emailAt = at + 1;
      at = writeItems(json, at, emailHashes, emailCount);
    }
    if (phoneCount > 0) {
      if (emailCount > 0) json[at++] = COMMA;
      at += json.write('"phone_hash":[', at, 'latin1');
      this.phoneAt = at + 1;
      at = writeItems(json, at, phoneHashes, phoneCount);
    }
    json[at++] = 0x7d;
    if (at !== size) throw new Error(`MapV3HashRequest: wrote ${at} bytes of ${size}`);
    this.json = json;
  }

  get email_hash(): string[] | undefined {
    if (this.emailCount === 0) return undefined;
    this.emailTexts ??= this.texts(this.emailAt, this.emailCount);
    return this.emailTexts;
  }

  get phone_hash(): string[] | undefined {
    if (this.phoneCount === 0) return undefined;
    this.phoneTexts ??= this.texts(this.phoneAt, this.phoneCount);
    return this.phoneTexts;
  }

  /** JSON.stringify of the request is its JSON, as for a plain one. */
  toJSON(): MapV3Request {
    const request: MapV3Request = {};
    const { email_hash, phone_hash } = this;
    if (email_hash !== undefined) request.email_hash = email_hash;
    if (phone_hash !== undefined) request.phone_hash = phone_hash;
    return request;
  }

  private texts(at: number, count: number): string[] {
    const out = new Array<string>(count);
    for (let i = 0; i < count; i++)
      out[i] = this.json.toString('latin1', at + i * ITEM_BYTES, at + i * ITEM_BYTES + HASH_CHARS);
    return out;
  }
}

/**
 * Writes `count` hashes as JSON strings, comma-separated, then `]`; returns the position after it. A hash is
 * copied eight bytes at a time, as doubles: its characters are base64 (0x2B to 0x7A), so every eight of them read
 * as a double are a finite, normal number, written back bit for bit. A loop over single bytes of a Uint8Array
 * costs several times as much, and a copy call per hash more than the copy.
 */
function writeItems(json: Buffer, at: number, hashes: Uint8Array, count: number): number {
  if (hashes.length < count * HASH_CHARS) throw new Error('MapV3HashRequest: fewer hash bytes than hashes');
  const from = new DataView(hashes.buffer, hashes.byteOffset, hashes.byteLength);
  const to = new DataView(json.buffer, json.byteOffset, json.byteLength);
  let i = at;
  for (let k = 0; k < count; k++) {
    if (k > 0) to.setUint8(i++, COMMA);
    to.setUint8(i, QUOTE);
    const j = k * HASH_CHARS;
    to.setFloat64(i + 1, from.getFloat64(j, true), true);
    to.setFloat64(i + 9, from.getFloat64(j + 8, true), true);
    to.setFloat64(i + 17, from.getFloat64(j + 16, true), true);
    to.setFloat64(i + 25, from.getFloat64(j + 24, true), true);
    to.setFloat64(i + 33, from.getFloat64(j + 32, true), true);
    to.setInt32(i + 41, from.getInt32(j + 40, true), true);
    to.setUint8(i + 45, QUOTE);
    i += HASH_CHARS + 2;
  }
  json[i++] = 0x5d;
  return i;
}

/** The JSON bytes of a request body: a MapV3HashRequest's as they are, else JSON.stringify's. */
export function requestJson(payload: object): Buffer {
  return payload instanceof MapV3HashRequest ? payload.json : Buffer.from(JSON.stringify(payload), 'utf8');
}

/** How many items of `kind` a v3 map request sends. */
export function sentCount(request: MapV3Request, kind: keyof MapV3Request): number {
  if (request instanceof MapV3HashRequest) {
    if (kind === 'email_hash') return request.emailCount;
    if (kind === 'phone_hash') return request.phoneCount;
    return 0;
  }
  return request[kind]?.length ?? 0;
}
