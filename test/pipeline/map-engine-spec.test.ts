import { describe, expect, it } from 'vitest';
import { settleEngine } from '../../src/pipeline/jobs/map-engine-spec.js';

// the map job's own steps read one spec settled from the options: every default filled in once

describe('settleEngine', () => {
  it('fills in the API, the batch size, fail-fast and dry run when nothing was asked', () => {
    const spec = settleEngine({ output: { format: 'csv' } });
    expect(spec).toMatchObject({ api: 'v3', batchSize: 5000, failFast: false, dryRun: false, concurrency: undefined });
    expect(spec.rejectsNote).toBeUndefined();
  });

  it('keeps what was asked, and gives the layout the output time and hash formats', () => {
    const spec = settleEngine({
      api: 'v2',
      batchSize: 100,
      failFast: true,
      concurrency: 3,
      emailCol: ['mail'],
      nullValues: ['NULL'],
      layout: { keep: ['id'] },
      output: { format: 'jsonl', timeFormat: 'iso', hashEncoding: 'hex' },
    });
    expect(spec).toMatchObject({ api: 'v2', batchSize: 100, failFast: true, concurrency: 3 });
    expect(spec.columns).toMatchObject({
      emailCol: ['mail'],
      nullValues: ['NULL'],
      layout: { keep: ['id'], timeFormat: 'iso', hashEncoding: 'hex' },
    });
    expect('phoneCol' in spec.columns).toBe(false);
  });

  it('says once that --rejects named in another format is written in the output format', () => {
    expect(settleEngine({ rejects: 'bad.jsonl', output: { format: 'csv' } }).rejectsNote).toBe(
      '--rejects bad.jsonl is written as CSV, the format of the output',
    );
    expect(settleEngine({ rejects: 'bad.csv', output: { format: 'csv' } }).rejectsNote).toBeUndefined();
  });
});
