import { hash } from 'node:crypto';
import {
  isNormalizedPhone,
  normalizeEmail,
  normalizeHash,
  sha256Base64,
  type DiiType,
  type IdentifierKind,
} from '../identity/index.js';
import { DAY_MS } from './clock.js';
import type { IdentityEngine, IdentityScope, TestIdentityRole } from './contracts.js';
import type { OptoutRegistry } from './optout-registry.js';
import { PREVIOUS_UID_WINDOW_DAYS, ROTATION_PERIOD_DAYS, SaltBuckets, type BucketView } from './salt-buckets.js';
import { deriveSecret } from './seed.js';
import { testIdentityRole } from './test-identities.js';

/**
 * DII -> raw UID as the operator computes it (docs/wire-protocol.md §8.1, V2 raw-UID format):
 * H = the DII hash, F = SHA-256(base64(H) ‖ first-level salt), bucket from F, raw UID = SHA-256(base64(F) ‖ salt).
 * Everything stays in base64 strings on the hot path: one-shot hashes of concatenated strings are the cheapest
 * form Node offers, and the bucket index can be read off F's first four base64 characters.
 */

/** The instant a whole request is answered at; computed once per request, not per item. */
export interface MappingInstant {
  readonly nowMs: number;
  readonly day: number;
  /** Start of the next UTC day, seconds: the r floor when a bucket's refresh time is already past. */
  readonly nextMidnightS: number;
}

export type Resolution =
  | {
      readonly kind: 'mapped';
      readonly u: string;
      readonly p: string | null;
      readonly r: number;
      readonly bucket: number;
    }
  | { readonly kind: 'optout' }
  | { readonly kind: 'invalid' };

const OPTOUT: Resolution = { kind: 'optout' };
const INVALID: Resolution = { kind: 'invalid' };

const BASE64_VALUE = (c: number): number =>
  c >= 97 ? c - 71 : c >= 65 ? c - 65 : c >= 48 ? c + 4 : c === 43 ? 62 : 63;

const BASE64_CHAR = (() => {
  const table = new Uint8Array(128);
  for (const c of 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/') table[c.charCodeAt(0)] = 1;
  return table;
})();

/** 44 characters of standard base64, padding only at the end: what normalizeHash accepts as base64. */
function isBase64Hash(s: string): boolean {
  if (s.length !== 44) return false;
  let end = 44;
  if (s.charCodeAt(43) === 61) end = s.charCodeAt(42) === 61 ? 42 : 43;
  for (let i = 0; i < end; i++) {
    const c = s.charCodeAt(i);
    if (c >= 128 || BASE64_CHAR[c] === 0) return false;
  }
  return true;
}

/**
 * The operator decodes a base64 hash and re-encodes it before computing F, so 44 characters whose unused
 * trailing bits are not zero stand for the same bytes as the canonical text. Only those rare inputs pay a decode.
 */
function canonicalHashB64(h: string): string {
  if (h.length !== 44 || h.charCodeAt(43) !== 61) return h;
  const spareBits =
    h.charCodeAt(42) === 61 ? BASE64_VALUE(h.charCodeAt(41)) & 0x0f : BASE64_VALUE(h.charCodeAt(42)) & 0x03;
  return spareBits === 0 ? h : Buffer.from(h, 'base64').toString('base64');
}

export class LocalIdentityEngine implements IdentityEngine {
  private readonly firstLevelSalt: string;
  readonly buckets: SaltBuckets;
  /** Scratch for the bucket lookup of the item being resolved (one item at a time: the service is single-threaded). */
  private readonly view: BucketView = { lastRotationDay: 0, current: '', previous: '' };

  constructor(
    seed: string,
    readonly scope: IdentityScope,
    readonly registry: OptoutRegistry,
  ) {
    this.firstLevelSalt = deriveSecret(seed, `${scope}/first-level-salt`).toString('base64');
    this.buckets = new SaltBuckets(seed, scope);
  }

  instant(nowMs: number): MappingInstant {
    const day = Math.floor(nowMs / DAY_MS);
    return { nowMs, day, nextMidnightS: (day + 1) * 86_400 };
  }

  /** One identifier of a map request, validated and normalized as the operator does. */
  resolve(kind: IdentifierKind, value: string, at: MappingInstant): Resolution {
    switch (kind) {
      case 'email_hash':
      case 'phone_hash': {
        // The common case (44-char base64) is checked here without a regex; hex and odd shapes take the long way.
        const h = isBase64Hash(value) ? value : normalizeHash(value);
        if (h === null) return INVALID;
        return this.resolveHash(kind === 'email_hash' ? 'email' : 'phone', canonicalHashB64(h), at);
      }
      case 'email': {
        const normalized = normalizeEmail(value);
        return normalized === null ? INVALID : this.resolveHash('email', sha256Base64(normalized), at);
      }
      case 'phone':
        return isNormalizedPhone(value) ? this.resolveHash('phone', sha256Base64(value), at) : INVALID;
    }
  }

  resolveHash(type: DiiType, hashB64: string, at: MappingInstant): Resolution {
    const role = testIdentityRole(type, hashB64);
    if (role === 'optout') return OPTOUT;
    // The other test identities are forced in, whatever the registry says.
    const registryApplies = role === null;
    const f = hash('sha256', hashB64 + this.firstLevelSalt, 'base64');
    if (registryApplies && this.registry.hasFirstLevel(f)) return OPTOUT;
    const bucket = this.buckets.bucketOf(f);
    const checkAdvertisingIds = registryApplies && this.registry.hasAdvertisingIdOptouts;
    const view = this.view;
    this.buckets.view(bucket, at.day, checkAdvertisingIds, view);
    const u = hash('sha256', f + view.current, 'base64');
    const inWindow = at.day - view.lastRotationDay < PREVIOUS_UID_WINDOW_DAYS;
    const previous = view.previous === '' ? null : hash('sha256', f + view.previous, 'base64');
    if (checkAdvertisingIds && (this.registry.hasAdvertisingId(u) || this.registry.hasAdvertisingId(previous!)))
      return OPTOUT;
    const refreshFromMs = (view.lastRotationDay + ROTATION_PERIOD_DAYS) * DAY_MS;
    const r = refreshFromMs > at.nowMs ? Math.floor(refreshFromMs / 1000) : at.nextMidnightS;
    return { kind: 'mapped', u, p: inWindow ? previous : null, r, bucket };
  }

  firstLevelB64(hashB64: string): string {
    return hash('sha256', canonicalHashB64(hashB64) + this.firstLevelSalt, 'base64');
  }

  /** Raw UIDs of F at an instant: under the current salt and under the one before it (whatever its age). */
  rawUidsOf(firstLevelB64: string, nowMs: number): { current: string; previous: string } {
    const bucket = this.buckets.bucketOf(firstLevelB64);
    const { epoch } = this.buckets.stateAt(bucket, nowMs);
    return {
      current: hash('sha256', firstLevelB64 + this.buckets.salt(bucket, epoch), 'base64'),
      previous: hash('sha256', firstLevelB64 + this.buckets.salt(bucket, epoch - 1), 'base64'),
    };
  }

  /** Registers an identity's opt-out; its raw UIDs at `nowMs` become visible to /v2/optout/status. */
  optOutIdentity(hashB64: string, sinceMs: number, nowMs: number): void {
    const f = this.firstLevelB64(hashB64);
    const { current, previous } = this.rawUidsOf(f, nowMs);
    this.registry.addIdentity(f, sinceMs, [current, previous]);
  }

  optOutAdvertisingId(rawUid: string, sinceMs: number): void {
    this.registry.addAdvertisingId(rawUid, sinceMs);
  }

  // IdentityEngine (the token part's view)

  firstLevelHash(hashB64: string): Buffer {
    return Buffer.from(this.firstLevelB64(hashB64), 'base64');
  }

  rawUid(_type: DiiType, firstLevel: Buffer, nowMs: number): string {
    return this.rawUidsOf(firstLevel.toString('base64'), nowMs).current;
  }

  isOptedOut(type: DiiType, hashB64: string, firstLevel: Buffer, nowMs: number): boolean {
    if (hashB64 !== '') {
      const role = testIdentityRole(type, canonicalHashB64(hashB64));
      if (role !== null) return role === 'optout';
    }
    const f = firstLevel.toString('base64');
    if (this.registry.hasFirstLevel(f)) return true;
    if (!this.registry.hasAdvertisingIdOptouts) return false;
    const { current, previous } = this.rawUidsOf(f, nowMs);
    return this.registry.hasAdvertisingId(current) || this.registry.hasAdvertisingId(previous);
  }

  testIdentity(type: DiiType, hashB64: string): TestIdentityRole | null {
    return testIdentityRole(type, canonicalHashB64(hashB64));
  }
}
