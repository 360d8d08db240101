import { createCipheriv, hash } from 'node:crypto';
import { DAY_MS } from './clock.js';
import { deriveSecret } from './seed.js';

/**
 * The 2^20 salt buckets of the local service and their rotation schedule (docs/wire-protocol.md §8.2-8.3).
 *
 * Bucket i has a phase day φ_i in [0, 365) and rotates at 00:00 UTC of every day D (days since the Unix
 * epoch) with (D - φ_i) mod 365 = 0, so about 1/365 of the buckets rotate each day, as in production. Its
 * rotation epoch k counts those rotations; the salt of epoch k is a keyed hash of (i, k), so any instant's
 * salt (and the one before it) is known without keeping history, and the schedule moves with the clock.
 */

export const BUCKET_COUNT = 1 << 20;
export const ROTATION_PERIOD_DAYS = 365;
/** p is offered for this many whole days after a bucket's last rotation. */
export const PREVIOUS_UID_WINDOW_DAYS = 90;

const BASE64_VALUES = (() => {
  const table = new Int8Array(128).fill(-1);
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  for (let i = 0; i < alphabet.length; i++) table[alphabet.charCodeAt(i)] = i;
  return table;
})();

const BUCKET_ID_ALPHABET = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
const NO_EPOCH = -0x80000000;
const CHUNK_BITS = 12;
const CHUNK_MASK = (1 << CHUNK_BITS) - 1;
/**
 * Per bucket, side by side in one array so that a lookup touches one cache line: the phase, then two salt
 * slots (epoch, salt) chosen by the parity of the epoch, so the current and the previous salts never collide.
 */
const ENTRY = 5;
type SaltChunk = (number | string)[];

/** What a raw UID needs from its bucket on one day; filled in place (the map hot path allocates nothing here). */
export interface BucketView {
  lastRotationDay: number;
  current: string;
  /** The salt before the current one, or '' when it was not asked for. */
  previous: string;
}

function mod(a: number, n: number): number {
  const r = a % n;
  return r < 0 ? r + n : r;
}

/** A bucket's rotation state at one instant. */
export interface RotationState {
  /** Day (since the epoch) of the latest rotation at or before the instant. */
  lastRotationDay: number;
  /** Rotation count of that salt; the previous salt is epoch - 1. */
  epoch: number;
}

export class SaltBuckets {
  /** φ_i per bucket. */
  private readonly phases: Uint16Array;
  /** Bucket indexes grouped by phase (counting sort), so "rotated since" never scans all buckets. */
  private readonly byPhase: Uint32Array;
  private readonly phaseStart: Uint32Array;
  /** Salt cache, allocated in chunks on first use: a service that maps a few identities never pays for all 2^20. */
  private readonly saltChunks: (SaltChunk | undefined)[] = new Array<SaltChunk | undefined>(
    BUCKET_COUNT >>> CHUNK_BITS,
  ).fill(undefined);
  private readonly saltKey: string;
  private readonly bucketIdKey: Buffer;
  private readonly bucketIdMask: number;
  private bucketIdNoise: Buffer | undefined;

  constructor(seed: string, scope: string) {
    this.saltKey = deriveSecret(seed, `${scope}/rotating-salts`).toString('base64');
    this.bucketIdKey = deriveSecret(seed, `${scope}/bucket-ids`);
    this.bucketIdMask = deriveSecret(seed, `${scope}/bucket-id-mask`, 4).readUInt32BE(0) & (BUCKET_COUNT - 1);
    this.phases = derivePhases(deriveSecret(seed, `${scope}/rotation-phases`));
    const counts = new Uint32Array(ROTATION_PERIOD_DAYS + 1);
    for (let i = 0; i < BUCKET_COUNT; i++) counts[this.phases[i]! + 1]!++;
    for (let p = 1; p <= ROTATION_PERIOD_DAYS; p++) counts[p]! += counts[p - 1]!;
    this.phaseStart = counts.slice();
    this.byPhase = new Uint32Array(BUCKET_COUNT);
    const next = counts.slice(0, ROTATION_PERIOD_DAYS);
    for (let i = 0; i < BUCKET_COUNT; i++) this.byPhase[next[this.phases[i]!]!++] = i;
  }

  /**
   * Bucket of a first-level hash given as base64: (F[0] << 12) | (F[1] << 4) | (F[2] & 0x0F). The first four
   * base64 characters are exactly F[0..2], which saves decoding F for every item.
   */
  bucketOf(firstLevelB64: string): number {
    const v =
      (BASE64_VALUES[firstLevelB64.charCodeAt(0)]! << 18) |
      (BASE64_VALUES[firstLevelB64.charCodeAt(1)]! << 12) |
      (BASE64_VALUES[firstLevelB64.charCodeAt(2)]! << 6) |
      BASE64_VALUES[firstLevelB64.charCodeAt(3)]!;
    return ((v >>> 8) << 4) | (v & 0x0f);
  }

  phaseOf(bucket: number): number {
    return this.phases[bucket]!;
  }

  /** Latest rotation day at or before `day` (days since the epoch, UTC). */
  lastRotationDay(bucket: number, day: number): number {
    return day - mod(day - this.phases[bucket]!, ROTATION_PERIOD_DAYS);
  }

  stateAt(bucket: number, nowMs: number): RotationState {
    const lastRotationDay = this.lastRotationDay(bucket, Math.floor(nowMs / DAY_MS));
    return { lastRotationDay, epoch: (lastRotationDay - this.phases[bucket]!) / ROTATION_PERIOD_DAYS };
  }

  /** Base64 salt of a bucket's rotation epoch; computed once per (bucket, epoch) while it is current or previous. */
  salt(bucket: number, epoch: number): string {
    return this.saltIn(this.chunkOf(bucket), (bucket & CHUNK_MASK) * ENTRY, bucket, epoch);
  }

  /** The current salt (and the previous one when `withPrevious` or inside the p window) of a bucket on `day`. */
  view(bucket: number, day: number, withPrevious: boolean, out: BucketView): void {
    const chunk = this.chunkOf(bucket);
    const base = (bucket & CHUNK_MASK) * ENTRY;
    const phase = chunk[base] as number;
    const lastRotationDay = day - mod(day - phase, ROTATION_PERIOD_DAYS);
    const epoch = (lastRotationDay - phase) / ROTATION_PERIOD_DAYS;
    out.lastRotationDay = lastRotationDay;
    out.current = this.saltIn(chunk, base, bucket, epoch);
    out.previous =
      withPrevious || day - lastRotationDay < PREVIOUS_UID_WINDOW_DAYS
        ? this.saltIn(chunk, base, bucket, epoch - 1)
        : '';
  }

  private chunkOf(bucket: number): SaltChunk {
    const c = bucket >>> CHUNK_BITS;
    let chunk = this.saltChunks[c];
    if (chunk === undefined) {
      chunk = new Array<number | string>((CHUNK_MASK + 1) * ENTRY);
      for (let i = 0, b = c << CHUNK_BITS; i <= CHUNK_MASK; i++, b++) {
        const at = i * ENTRY;
        chunk[at] = this.phases[b]!;
        chunk[at + 1] = NO_EPOCH;
        chunk[at + 2] = '';
        chunk[at + 3] = NO_EPOCH;
        chunk[at + 4] = '';
      }
      this.saltChunks[c] = chunk;
    }
    return chunk;
  }

  private saltIn(chunk: SaltChunk, base: number, bucket: number, epoch: number): string {
    const slot = base + 1 + 2 * (epoch & 1);
    if (chunk[slot] === epoch) return chunk[slot + 1] as string;
    // A keyed one-shot hash, not an HMAC: it only has to be unpredictable without the seed, and a first sight
    // of each bucket (a million of them in a large run) must stay cheap.
    const salt = hash('sha256', `${this.saltKey}/${bucket}/${epoch}`, 'base64');
    chunk[slot] = epoch;
    chunk[slot + 1] = salt;
    return salt;
  }

  /**
   * The v2 bucket_id: a stable 10-character alphanumeric name, not the index (clients must not rely on it).
   * Six characters come from a seeded keystream and four encode a seeded permutation of the index, so ids are
   * unique by construction and cost no hashing per call.
   */
  bucketId(bucket: number): string {
    const noise = (this.bucketIdNoise ??= keystream(this.bucketIdKey, 6 * BUCKET_COUNT));
    let id = '';
    const at = 6 * bucket;
    for (let i = 0; i < 6; i++) id += BUCKET_ID_ALPHABET[noise[at + i]! % 62];
    let x = Math.imul(bucket ^ this.bucketIdMask, 0x9e3b5) & (BUCKET_COUNT - 1);
    x ^= x >>> 11;
    for (let i = 0; i < 4; i++) {
      id += BUCKET_ID_ALPHABET[x % 62];
      x = Math.floor(x / 62);
    }
    return id;
  }

  /**
   * Calls `visit` for every bucket whose last rotation at `nowMs` is at or after `sinceMs`, day by day (oldest
   * first). Only the phase groups of the days in range are touched.
   */
  forEachRotatedSince(sinceMs: number, nowMs: number, visit: (bucket: number, rotationDay: number) => void): void {
    const today = Math.floor(nowMs / DAY_MS);
    const firstDay = Math.max(Math.ceil(sinceMs / DAY_MS), today - (ROTATION_PERIOD_DAYS - 1));
    for (let day = firstDay; day <= today; day++) {
      const phase = mod(day, ROTATION_PERIOD_DAYS);
      const end = this.phaseStart[phase + 1]!;
      for (let j = this.phaseStart[phase]!; j < end; j++) visit(this.byPhase[j]!, day);
    }
  }
}

function keystream(key: Buffer, length: number): Buffer {
  return createCipheriv('aes-256-ctr', key, Buffer.alloc(16)).update(Buffer.alloc(length));
}

/** φ_i from an AES-CTR keystream: 4 bytes per bucket, reduced mod 365 (the bias is far below anything visible). */
function derivePhases(key: Buffer): Uint16Array {
  const stream = keystream(key, 4 * BUCKET_COUNT);
  const phases = new Uint16Array(BUCKET_COUNT);
  // Bytes assembled by hand (big-endian) so the schedule is the same on every platform.
  for (let i = 0, j = 0; i < BUCKET_COUNT; i++, j += 4) {
    const word = ((stream[j]! << 24) | (stream[j + 1]! << 16) | (stream[j + 2]! << 8) | stream[j + 3]!) >>> 0;
    phases[i] = word % ROTATION_PERIOD_DAYS;
  }
  return phases;
}
