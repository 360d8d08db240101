import { sha256Base64, type DiiType } from '../identity/index.js';
import type { TestIdentityRole } from './contracts.js';

/**
 * The operator's special test identities (docs/wire-protocol.md §7), matched on (DII type, hash): the raw value and
 * its hash are the same identity, but a phone's hash sent as an email_hash is not. The operator's constants win
 * over the token-generate docs page, which swaps the two phone numbers.
 */
const TABLE: Record<DiiType, ReadonlyMap<string, TestIdentityRole>> = {
  email: new Map([
    [sha256Base64('optout@example.com'), 'optout'],
    [sha256Base64('refresh-optout@example.com'), 'refresh-optout'],
    [sha256Base64('validate@example.com'), 'validate'],
  ]),
  phone: new Map([
    [sha256Base64('+00000000000'), 'optout'],
    [sha256Base64('+00000000002'), 'refresh-optout'],
    [sha256Base64('+12345678901'), 'validate'],
  ]),
};

/** First characters of the test hashes per type: most hashes are ruled out without hashing the string for a Map. */
const FIRST_CHARS: Record<DiiType, ReadonlySet<number>> = {
  email: new Set([...TABLE.email.keys()].map((h) => h.charCodeAt(0))),
  phone: new Set([...TABLE.phone.keys()].map((h) => h.charCodeAt(0))),
};

export function testIdentityRole(type: DiiType, hashB64: string): TestIdentityRole | null {
  if (!FIRST_CHARS[type].has(hashB64.charCodeAt(0))) return null;
  return TABLE[type].get(hashB64) ?? null;
}
