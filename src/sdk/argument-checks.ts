/** Checks of the library's arguments, so that a wrong one throws an ArgumentError before anything is sent. */
import { isRawUidShape, parsePhoneRegion, PhoneRegionError, type PhoneRegion } from '../identity/index.js';
import { decodeKey, type TokenIdentity } from '../protocol/index.js';
import { ArgumentError } from './errors.js';

/** One email, phone or hash, named by its kind; hashes are base64 (44 characters) or hex (64) of a SHA-256. */
export type Identifier = { email: string } | { phone: string } | { emailHash: string } | { phoneHash: string };

export type IdentifierKey = 'email' | 'phone' | 'emailHash' | 'phoneHash';

export const IDENTIFIER_KEYS: readonly IdentifierKey[] = ['email', 'phone', 'emailHash', 'phoneHash'];

export const KIND_OF_KEY = {
  email: 'email',
  phone: 'phone',
  emailHash: 'email_hash',
  phoneHash: 'phone_hash',
} as const satisfies Record<IdentifierKey, string>;

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'string' ? 'a string' : `a ${typeof value}`;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The one key and value of an Identifier; its value is never repeated in a message (it may be an email). */
export function checkIdentifier(value: unknown, what: string): { key: IdentifierKey; value: string } {
  const hint = `give one of { email }, { phone }, { emailHash } or { phoneHash }, e.g. { email: 'user@example.com' }`;
  if (!isRecord(value)) throw new ArgumentError(`${what} must be an object, got ${describe(value)}: ${hint}`);
  const keys = IDENTIFIER_KEYS.filter((k) => value[k] !== undefined);
  if (keys.length !== 1) {
    const others = Object.keys(value).filter((k) => !IDENTIFIER_KEYS.includes(k as IdentifierKey));
    const found = keys.length === 0 ? `none${others.length ? ` (it has ${others.join(', ')})` : ''}` : keys.join(', ');
    throw new ArgumentError(`${what} must have exactly one identifier, found ${found}: ${hint}`);
  }
  const key = keys[0];
  const text = value[key];
  if (typeof text !== 'string') throw new ArgumentError(`${what}.${key} must be a string, got ${describe(text)}`);
  return { key, value: text };
}

/** A list of strings, not empty (unless allowed), each a string: the index of the first wrong item is named. */
export function checkStringList(value: unknown, what: string, options: { allowEmpty: boolean }): readonly string[] {
  if (!Array.isArray(value)) throw new ArgumentError(`${what} must be an array of strings, got ${describe(value)}`);
  if (value.length === 0 && !options.allowEmpty)
    throw new ArgumentError(`${what} is empty: give at least one item (nothing was sent)`);
  for (let i = 0; i < value.length; i++) {
    if (typeof value[i] !== 'string')
      throw new ArgumentError(`${what}[${i}] must be a string, got ${describe(value[i])}`);
  }
  return value as string[];
}

/** Raw UIDs as the opt-out endpoint takes them: 44 characters of base64 each. */
export function checkRawUids(value: unknown, what: string): readonly string[] {
  const list = checkStringList(value, what, { allowEmpty: false });
  for (let i = 0; i < list.length; i++) {
    if (!isRawUidShape(list[i]))
      throw new ArgumentError(`${what}[${i}] is not a raw UID: a raw UID is 44 characters of base64, as map returns`);
  }
  return list;
}

/** A region as a user writes it (`US`, `gb`): an ISO 3166 alpha-2 country with a known numbering plan. */
export function checkPhoneRegion(value: unknown, what: string): PhoneRegion | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string')
    throw new ArgumentError(`${what} must be a two-letter ISO 3166 country code such as 'US', got ${describe(value)}`);
  try {
    return parsePhoneRegion(value);
  } catch (err) {
    if (err instanceof PhoneRegionError) throw new ArgumentError(`${what}: ${err.message}`, { cause: err });
    throw err;
  }
}

/** The two fields a refresh needs; the other fields of an identity are optional here. */
export interface RefreshableIdentity {
  refresh_token: string;
  refresh_response_key: string;
}

/** An identity to refresh: its refresh_token and a refresh_response_key that decodes (neither is ever printed). */
export function checkRefreshable(value: unknown, what: string): RefreshableIdentity & Partial<TokenIdentity> {
  const hint = 'give the identity object that generateToken or refreshToken returned';
  if (!isRecord(value)) throw new ArgumentError(`${what} must be an identity object, got ${describe(value)}: ${hint}`);
  for (const field of ['refresh_token', 'refresh_response_key'] as const) {
    if (typeof value[field] !== 'string' || (value[field] as string).trim() === '')
      throw new ArgumentError(`${what} has no ${field}: ${hint}`);
  }
  try {
    decodeKey(value.refresh_response_key as string, 'refresh_response_key');
  } catch {
    throw new ArgumentError(
      `${what}.refresh_response_key is not a base64 encoding of 32 bytes (44 characters): ${hint}, unchanged`,
    );
  }
  return value as unknown as RefreshableIdentity & Partial<TokenIdentity>;
}

/** A non-empty string argument, such as a token. */
export function checkText(value: unknown, what: string): string {
  if (typeof value !== 'string') throw new ArgumentError(`${what} must be a string, got ${describe(value)}`);
  if (value.trim() === '') throw new ArgumentError(`${what} is empty`);
  return value;
}

/** An AbortSignal or nothing. */
export function checkSignal(value: unknown, what: string): AbortSignal | undefined {
  if (value === undefined || value instanceof AbortSignal) return value;
  throw new ArgumentError(`${what} must be an AbortSignal (from new AbortController().signal), got ${describe(value)}`);
}
