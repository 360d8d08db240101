import { describe, expect, it } from 'vitest';
import { defaultHashThreads, defaultMapThreads } from '../../src/pipeline/run/run-plan.js';

describe('--threads defaults', () => {
  it('map: cores - 1, at least 1, at most 3 (past that the main thread is the bound)', () => {
    expect([1, 2, 3, 4, 8, 64].map((cores) => defaultMapThreads(cores))).toEqual([1, 1, 2, 3, 3, 3]);
  });

  it('hash: one per core, at most 4', () => {
    expect([1, 2, 3, 4, 8, 64].map((cores) => defaultHashThreads(cores))).toEqual([1, 2, 3, 4, 4, 4]);
  });
});
