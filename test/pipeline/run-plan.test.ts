import { describe, expect, it } from 'vitest';
import {
  defaultHashThreads,
  defaultMapThreads,
  planThreads,
  SMALL_INPUT_BYTES,
} from '../../src/pipeline/run/run-plan.js';

describe('--threads defaults', () => {
  it('map: cores - 1, at least 1, at most 3 (past that the main thread is the bound)', () => {
    expect([1, 2, 3, 4, 8, 64].map((cores) => defaultMapThreads(cores))).toEqual([1, 1, 2, 3, 3, 3]);
  });

  it('hash: one per core, at most 4', () => {
    expect([1, 2, 3, 4, 8, 64].map((cores) => defaultHashThreads(cores))).toEqual([1, 2, 3, 4, 4, 4]);
  });
});

describe('--threads auto for a small input', () => {
  it('takes no thread for local files under SMALL_INPUT_BYTES in all, the default at and above it', () => {
    const plan = (inputBytes: number | undefined, threads: number | 'auto' = 'auto') =>
      planThreads({ command: 'map', threads, inputBytes, outputDir: false, outputFormat: 'csv' });
    expect(plan(SMALL_INPUT_BYTES - 1).rowThreads).toBe(0);
    expect(plan(SMALL_INPUT_BYTES - 1).readThread).toBe(false);
    expect(plan(SMALL_INPUT_BYTES).rowThreads).toBe(defaultMapThreads());
    // unknown size (stdin, S3, gzip): the default
    expect(plan(undefined).rowThreads).toBe(defaultMapThreads());
    // asked for: kept, whatever the size
    expect(plan(10, 2).rowThreads).toBe(2);
    const hash = planThreads({
      command: 'hash',
      threads: 'auto',
      inputBytes: 100,
      outputDir: false,
      outputFormat: 'csv',
    });
    expect(hash.rowThreads).toBe(0);
  });
});
