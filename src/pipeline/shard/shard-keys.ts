/** Which runner under --shard K/N owns a state entry: by a hash of its key, so the N shares are disjoint and cover all. */
import type { Shard } from './shard-spec.js';

/**
 * Whether the entry keyed by (`type`, `hash`) is runner K's. The key's stored hash is already spread evenly, but
 * it is hashed again (32-bit FNV-1a over type and hash, then mixed) so that the share never depends on how a hash
 * is written and the same hash of two types may fall apart.
 */
export function ownsKey(shard: Shard, type: string, hash: string): boolean {
  return runnerOfKey(type, hash, shard.count) === shard.index - 1;
}

/** The runner K (0..count-1, as --shard K/N counts) an entry's key falls to. */
export function runnerOfKey(type: string, hash: string, count: number): number {
  let h = 0x811c9dc5;
  const mix = (code: number): void => {
    h ^= code;
    h = Math.imul(h, 0x01000193);
  };
  for (let i = 0; i < type.length; i++) mix(type.charCodeAt(i));
  mix(0);
  for (let i = 0; i < hash.length; i++) mix(hash.charCodeAt(i));
  // FNV's low bits depend only on the inputs' low bits: mixed through (murmur3's finalizer) before the modulo
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return (h >>> 0) % count;
}
