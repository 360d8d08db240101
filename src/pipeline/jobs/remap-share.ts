/** The remap engine's share option for `remap-due --shard K/N`: the due entries whose key falls to this runner. */
import type { RemapOptions } from '../remap/remap-engine.js';
import { ownsKey } from '../shard/shard-keys.js';
import type { Shard } from '../shard/shard-spec.js';

export function shareOf(shard: Shard | undefined): Pick<RemapOptions, 'share'> {
  if (shard === undefined || shard.count === 1) return {};
  return { share: (entry) => ownsKey(shard, entry.type, entry.hash) };
}
