/** `--shard K/N`: runner K of N does its share of the work (the jobs decide what a share is). */
import type { Command } from 'commander';
import { parseShard, type Shard } from '../../pipeline/shard/shard-spec.js';

export function addShardOption(cmd: Command, share: string): Command {
  return cmd.option('--shard <K/N>', `runner K of N: ${share}`, parseShard);
}

/** The --shard value commander parsed, or undefined. */
export function shardFlag(opts: Record<string, unknown>): Shard | undefined {
  return opts.shard !== undefined ? (opts.shard as Shard) : undefined;
}
