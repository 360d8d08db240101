import { createHash } from 'node:crypto';
import type { DiiType } from '../../../src/identity/index.js';
import { sha256Base64 } from '../../../src/identity/index.js';
import type {
  IdentityEngine,
  IdentityScope,
  ServiceClock,
  TestIdentityRole,
  TokenLifetimes,
} from '../../../src/service/contracts.js';

/** Test doubles for the HTTP core's engine and clock, so these tests do not depend on the core's code. */

export class FakeClock implements ServiceClock {
  constructor(public now: number) {}
  nowMs(): number {
    return this.now;
  }
  advanceS(seconds: number): void {
    this.now += seconds * 1000;
  }
}

const ROLES: Record<DiiType, Record<string, TestIdentityRole>> = {
  email: {
    [sha256Base64('optout@example.com')]: 'optout',
    [sha256Base64('refresh-optout@example.com')]: 'refresh-optout',
    [sha256Base64('validate@example.com')]: 'validate',
  },
  phone: {
    [sha256Base64('+00000000000')]: 'optout',
    [sha256Base64('+00000000002')]: 'refresh-optout',
    [sha256Base64('+12345678901')]: 'validate',
  },
};

export class FakeEngine implements IdentityEngine {
  /** Bumping it stands for a salt rotation of every bucket: every raw UID changes. */
  saltGeneration = 0;
  /** Opted-out first-level hashes, hex. */
  readonly optedOut = new Set<string>();
  /** Every isOptedOut call, to see what the token part hands the engine. */
  readonly optOutQueries: { type: DiiType; hashB64: string; firstLevelHex: string }[] = [];

  constructor(
    readonly scope: IdentityScope = 'UID2',
    private readonly firstLevelSalt = 'local-first-level-salt',
  ) {}

  firstLevelHash(hashB64: string): Buffer {
    return createHash('sha256')
      .update(hashB64 + this.firstLevelSalt)
      .digest();
  }

  rawUid(_type: DiiType, firstLevel: Buffer, _nowMs: number): string {
    return createHash('sha256')
      .update(`${firstLevel.toString('base64')}salt-${this.saltGeneration}`)
      .digest('base64');
  }

  isOptedOut(type: DiiType, hashB64: string, firstLevel: Buffer, _nowMs: number): boolean {
    this.optOutQueries.push({ type, hashB64, firstLevelHex: firstLevel.toString('hex') });
    return this.testIdentity(type, hashB64) === 'optout' || this.optedOut.has(firstLevel.toString('hex'));
  }

  testIdentity(type: DiiType, hashB64: string): TestIdentityRole | null {
    return ROLES[type][hashB64] ?? null;
  }

  optOut(hashB64: string): void {
    this.optedOut.add(this.firstLevelHash(hashB64).toString('hex'));
  }
}

export const LIFETIMES: TokenLifetimes = { identityExpiresS: 3600, refreshFromS: 900, refreshExpiresS: 86400 };

/** 2026-08-01T00:00:00Z: a fixed start so times in answers are exact. */
export const START_MS = Date.UTC(2026, 7, 1);

export const SEED = 'token-tests-seed';
