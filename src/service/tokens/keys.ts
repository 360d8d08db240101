import { createHash, hkdfSync } from 'node:crypto';

/**
 * The local operator's token keys. A real operator gets them from its core service; the local one derives them
 * from a seed so that a restarted service (same seed) still reads the tokens it issued before, and two services
 * with different seeds reject each other's tokens as made by an unknown key.
 */

export interface TokenKey {
  /** Key id as written into tokens: a signed 32-bit integer on the wire. */
  readonly id: number;
  readonly secret: Buffer;
}

export interface TokenKeys {
  /** Wraps every advertising token (the operator's master keyset). */
  readonly master: TokenKey;
  /** Encrypts the inner part of advertising tokens for the one publisher site this service knows. */
  readonly site: TokenKey;
  /** Encrypts refresh tokens and the 388-char wrapper around them. */
  readonly refresh: TokenKey;
  /** Any of the three by id, as the operator's key store answers a lookup. */
  byId(id: number): TokenKey | undefined;
}

const HKDF_SALT = 'uid2-batch local operator token keys v1';

function deriveSecret(seed: string, purpose: string): Buffer {
  return Buffer.from(hkdfSync('sha256', seed, HKDF_SALT, purpose, 32));
}

// Ids live in disjoint ranges so the three keys can never collide, whatever the seed; all stay below 2^24, so
// the wrapper's second byte (the key id's top byte) is 0 and refresh tokens start "AA" (UID2) / "EA" (EUID).
function deriveId(seed: string, purpose: string, rangeStart: number): number {
  const digest = createHash('sha256').update(HKDF_SALT).update('\0').update(seed).update('\0').update(purpose).digest();
  return rangeStart + (digest.readUInt32BE(0) % 1_000_000);
}

export function deriveTokenKeys(seed: string): TokenKeys {
  const master: TokenKey = { id: deriveId(seed, 'master', 1_000_000), secret: deriveSecret(seed, 'master') };
  const site: TokenKey = { id: deriveId(seed, 'site', 2_000_000), secret: deriveSecret(seed, 'site') };
  const refresh: TokenKey = { id: deriveId(seed, 'refresh', 3_000_000), secret: deriveSecret(seed, 'refresh') };
  const all = [master, site, refresh];
  return { master, site, refresh, byId: (id) => all.find((k) => k.id === id) };
}
