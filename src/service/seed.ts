import { hkdfSync } from 'node:crypto';

/**
 * Every secret of a local service (first-level salt, rotating salts, bucket ids, fault draws) comes from its
 * seed, so two runs with the same seed answer the same raw UIDs and a restarted service keeps its identities.
 * The scope is part of each derivation so a UID2 and an EUID service never share identities.
 */

const HKDF_SALT = 'uid2-batch local identity service v1';

export function deriveSecret(seed: string, purpose: string, length = 32): Buffer {
  return Buffer.from(hkdfSync('sha256', seed, HKDF_SALT, purpose, length));
}
