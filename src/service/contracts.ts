import type { DiiType } from '../identity/index.js';

/**
 * What the local service's parts need from each other. The HTTP core (server, envelopes, auth, limits,
 * faults, salts, map, buckets, opt-out) implements IdentityEngine and ServiceClock; the token part
 * (src/service/tokens/) implements TokenHandlers on top of them.
 */

export interface ServiceClock {
  /**
   * Identity time, Unix ms: what salts, rotation, r, p, token lifetimes and opt-outs are computed at. Moves with real
   * time from its start and jumps on /_local/clock. Request envelopes are checked against another clock (clock.ts).
   */
  nowMs(): number;
}

export type IdentityScope = 'UID2' | 'EUID';

export type TestIdentityRole = 'optout' | 'refresh-optout' | 'validate';

export interface IdentityEngine {
  readonly scope: IdentityScope;
  /** First-level hash F = SHA-256(base64(H) ‖ first-level salt), 32 bytes (docs/wire-protocol.md §8.1). */
  firstLevelHash(hashB64: string): Buffer;
  /** The raw UID (44-char base64) that F maps to at `nowMs`, from its salt bucket's current salt. */
  rawUid(type: DiiType, firstLevel: Buffer, nowMs: number): string;
  /** True when the registry or an always-optout test identity says so. */
  isOptedOut(type: DiiType, hashB64: string, firstLevel: Buffer, nowMs: number): boolean;
  /** The §6 test identity behind (type, hash), if any. Matching is on type and hash. */
  testIdentity(type: DiiType, hashB64: string): TestIdentityRole | null;
}

export interface TokenLifetimes {
  /** identity_expires - now, seconds (default 3600). */
  identityExpiresS: number;
  /** refresh_from - now, seconds (default 900). */
  refreshFromS: number;
  /** refresh_expires - now, seconds (default 86400). */
  refreshExpiresS: number;
}

/** A handler's answer before the HTTP core encrypts it: 200s are encrypted, everything else is sent as JSON. */
export type HandlerResult =
  | { http: 200; json: Record<string, unknown> }
  | { http: 400 | 401 | 500; json: { status: string; message?: string } };

/** Refresh is special: its 200 answer is encrypted with the presented token's refresh_response_key, no header. */
export type RefreshResult =
  | { http: 200; json: Record<string, unknown>; responseKey: Buffer }
  | { http: 400 | 500; json: { status: string; message?: string } };

export interface TokenHandlers {
  /** Decrypted request JSON of /v2/token/generate. */
  generate(request: unknown): HandlerResult;
  /** Decrypted request JSON of /v2/token/validate. */
  validate(request: unknown): HandlerResult;
  /** Raw body text of /v2/token/refresh; `authenticated` when a valid API key came with it. */
  refresh(body: string, authenticated: boolean): RefreshResult;
}

export interface TokenHandlerDeps {
  engine: IdentityEngine;
  clock: ServiceClock;
  lifetimes: TokenLifetimes;
  /** Seed for the service's token keys (deterministic across restarts with the same seed). */
  seed: string;
}
