/** The pending changes a sweep leaves to runs of another share count, named in one line each. */
import type { ChangeKind } from '../../state/types.js';
import { type ChangeChannel, isChangeChannel } from './change-journal.js';

const COMMANDS: Record<ChangeKind, string> = { remap: 'remap-due', optout: 'optout-check --state' };

/** How many shares a channel's runs split the state into: 1 for a run without --shard. */
function countOf(channel: ChangeChannel): number {
  const slash = channel.indexOf('/');
  return slash < 0 ? 1 : Number(channel.slice(slash + 1));
}

/**
 * The lines that say which pending changes of the run's kind it leaves where they are: those journaled by runs of
 * another share count (a whole run counting as one share), which only a run of that very share writes. A run never
 * writes another channel's rows, so none is written twice; the rows of its own count's other shares are its sibling
 * runners' and go unsaid. `counts`: the state's pending rows per channel.
 */
export function strandedChangeLines(counts: Record<string, number>, own: ChangeChannel): string[] {
  const kind = own.split(' ')[0] as ChangeKind;
  const command = COMMANDS[kind];
  return Object.keys(counts)
    .filter((c): c is ChangeChannel => isChangeChannel(c) && c.split(' ')[0] === kind)
    .filter((c) => counts[c] > 0 && countOf(c) !== countOf(own))
    .sort()
    .map((c) => {
      const share = c.includes(' ') ? `${command} --shard ${c.split(' ')[1]}` : `${command} without --shard`;
      return `${counts[c].toLocaleString('en-US')} pending change(s) of channel "${c}" are not written by this run: only ${share} writes them`;
    });
}
