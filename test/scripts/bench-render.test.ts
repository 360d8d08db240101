// bench/render.mjs: the scaling table and the Python ratio, in the terminal's table and in the README's.
import { describe, expect, it } from 'vitest';
// @ts-expect-error a plain script of the bench, without types
import { renderMarkdown, renderText } from '../../bench/render.mjs';

const machine = {
  date: '2026-11-28T00:00:00Z',
  cores: 2,
  cpu_model: 'CPU',
  memory_gib: 8,
  node: 'v20',
  load_avg_at_start: 1,
};
const scaling = (t: number, workers: number[]) => ({
  rows: 1000,
  seconds: 2,
  rows_per_s: 500,
  cpu_us_per_row: 9,
  main_us_per_row: 3,
  worker_us_per_row: workers,
  other_us_per_row: 1.5,
  gc_us_per_row: 1.8,
  gc_share: 0.2,
  mean_in_flight: null,
  max_in_flight: 1,
  scaling_threads: t,
});
const results = {
  'map 1M mixed --threads 1 (scaling)': scaling(1, [4.5]),
  'map 1M mixed --threads 2 (scaling)': scaling(2, [2, 2.5]),
  'official Python client against map, 200k emails at 250 ms': {
    rows: 200000,
    python_s: 30,
    python_runs_s: [30, 31],
    map_s: 4,
    map_runs_s: [4, 4.1],
    map_vs_python: 7.5,
  },
};

describe('the bench tables', () => {
  it('show one scaling row per --threads with each worker thread, and the Python ratio', () => {
    const text = renderText({ machine, results });
    expect(text).toMatch(/scaling, CPU per row of each thread/);
    expect(text).toMatch(/^ +1 +500 +9 +3 +4\.5 +1\.5 +1\.8 +2$/m);
    expect(text).toMatch(/^ +2 +500 +9 +3 +2 \+ 2\.5 +1\.5 +1\.8 +2$/m);
    expect(text).toMatch(/the Python client 30 s \(runs 30\/31\), map 4 s \(runs 4\/4\.1\): 7\.5x/);
    const md = renderMarkdown({ machine, results }, 'npm run bench');
    expect(md).toMatch(/^\| 2 \| 500 \| 9 \| 3 \| 2 \+ 2\.5 \| 1\.5 \| 1\.8 \| 2 \|$/m);
    expect(md).toMatch(/\| the Python client 30 s, map 4 s: 7\.5x \|/);
  });

  it('say why the Python case was skipped', () => {
    const skipped = { 'official Python client': { skipped: 'python3 cannot import uid2_client' } };
    expect(renderText({ machine, results: skipped })).toMatch(/skipped: python3 cannot import uid2_client/);
  });
});
