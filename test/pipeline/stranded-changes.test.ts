import { describe, expect, it } from 'vitest';
import { strandedChangeLines } from '../../src/pipeline/run/stranded-changes.js';

const counts = { remap: 2, 'remap 0/3': 1, 'remap 2/3': 1_500, 'optout 1/2': 4, 'not a channel': 9 };

describe('strandedChangeLines', () => {
  it("names the channels of the run's kind and of another share count, in name order", () => {
    expect(strandedChangeLines(counts, 'remap 1/4')).toEqual([
      '2 pending change(s) of channel "remap" are not written by this run: only remap-due without --shard writes them',
      '1 pending change(s) of channel "remap 0/3" are not written by this run: only remap-due --shard 0/3 writes them',
      '1,500 pending change(s) of channel "remap 2/3" are not written by this run: only remap-due --shard 2/3 writes them',
    ]);
  });

  it("leaves the shares of the run's own count unsaid, and the other kind's channels", () => {
    expect(strandedChangeLines(counts, 'remap 1/3')).toEqual([
      '2 pending change(s) of channel "remap" are not written by this run: only remap-due without --shard writes them',
    ]);
    expect(strandedChangeLines({ 'optout 1/2': 4, optout: 0 }, 'optout')).toEqual([
      '4 pending change(s) of channel "optout 1/2" are not written by this run: only optout-check --state --shard 1/2 writes them',
    ]);
    expect(strandedChangeLines({ 'optout 0/2': 3 }, 'optout 1/2')).toEqual([]);
  });
});
