import { sha256Base64, type DiiType } from '../../identity/index.js';
import type { IdentityEngine, TestIdentityRole } from '../contracts.js';

/**
 * A refresh token carries F, not the DII hash, so the test identities (docs/wire-protocol.md §7) can only be told
 * apart on refresh by computing F for each of their hashes and comparing. The engine stays the authority on
 * which role each hash has; this module only knows which values are test identities at all.
 */

const TEST_IDENTITY_HASHES: Record<DiiType, readonly string[]> = {
  email: ['optout@example.com', 'refresh-optout@example.com', 'validate@example.com', 'optout@unifiedid.com'].map(
    sha256Base64,
  ),
  phone: ['+00000000000', '+00000000002', '+12345678901', '+00000000001'].map(sha256Base64),
};

export function testIdentityOfFirstLevel(
  engine: IdentityEngine,
  type: DiiType,
  firstLevel: Buffer,
): TestIdentityRole | null {
  for (const hash of TEST_IDENTITY_HASHES[type]) {
    if (engine.firstLevelHash(hash).equals(firstLevel)) return engine.testIdentity(type, hash);
  }
  return null;
}
