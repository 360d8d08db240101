// bench/render.mjs: the scaling table, the Python ratio and the Node versions, in the terminal's table and the README's.
import { describe, expect, it } from 'vitest';
// @ts-expect-error a plain script of the bench, without types
import { mergeRuns, renderMarkdown, renderRuns, renderText } from '../../bench/render.mjs';

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

  it('give each Node version its CPU as a multiple of the first one, and whether the outputs agree', () => {
    const onNode = (version: string, cpu: number, ratio: number, same: boolean) => ({
      rows: 1000,
      seconds: 2,
      rows_per_s: 500,
      cli_cpu_s: cpu,
      node_version: version,
      cpu_vs_first: ratio,
      first_node: 'v20.1.0',
      same_output: same,
    });
    const nodes = {
      'map on Node v20.1.0': onNode('v20.1.0', 10, 1, true),
      'map on Node v24.2.0': onNode('v24.2.0', 8.5, 0.85, true),
    };
    const md = renderMarkdown({ machine, results: nodes }, 'npm run bench -- --only nodes');
    expect(md).toMatch(
      /^\| map on Node v24\.2\.0 \|.*\| CPU 0\.85x that on Node v20\.1\.0, output the same bytes on every Node \|$/m,
    );
    const differs = { 'map on Node v22.1.0': onNode('v22.1.0', 9, 0.9, false) };
    expect(renderText({ machine, results: differs })).toMatch(/CPU 0\.9x that on Node v20\.1\.0, output DIFFERS/);
  });

  it('keep each case under the run that measured it when a later run measures others', () => {
    const row = (rate: number) => ({ rows: 1000, seconds: 1, rows_per_s: rate });
    const monday = { ...machine, date: '2026-11-23T08:00:00Z' };
    const tuesday = { ...machine, date: '2026-11-24T09:30:00Z' };
    const first = mergeRuns(undefined, {
      machine: monday,
      command: 'npm run bench -- --only a,b',
      results: { 'case a': row(1), 'case b': row(2) },
    });
    const second = mergeRuns(first, {
      machine: tuesday,
      command: 'npm run bench -- --only b,c',
      results: { 'case b': row(20), 'case c': row(30) },
    });
    expect(second.runs.map((r: { cases: string[] }) => r.cases)).toEqual([['case a'], ['case b', 'case c']]);
    expect(second.results['case b'].rows_per_s).toBe(20);
    const md = renderRuns(second, true).split('\n');
    const mondayLine = md.findIndex((l: string) => l.startsWith('`npm run bench -- --only a,b`, 2026-11-23 08:00 UTC'));
    const tuesdayLine = md.findIndex((l: string) =>
      l.startsWith('`npm run bench -- --only b,c`, 2026-11-24 09:30 UTC'),
    );
    expect(mondayLine).toBeGreaterThanOrEqual(0);
    expect(tuesdayLine).toBeGreaterThan(mondayLine);
    const caseLine = (name: string) => md.findIndex((l: string) => l.startsWith(`| ${name} |`));
    expect(caseLine('case a')).toBeGreaterThan(mondayLine);
    expect(caseLine('case a')).toBeLessThan(tuesdayLine);
    expect(caseLine('case b')).toBeGreaterThan(tuesdayLine);
    expect(md.filter((l: string) => l.startsWith('| case b |'))).toHaveLength(1);
    // a file of an earlier bench, without runs: one table, as before
    const old = { machine: monday, command: 'npm run bench', results: { 'case a': row(1) } };
    expect(renderRuns(old, false)).toMatch(/^uid2-batch bench, 2026-11-23/m);
  });

  it('say why the Python case was skipped', () => {
    const skipped = { 'official Python client': { skipped: 'python3 cannot import uid2_client' } };
    expect(renderText({ machine, results: skipped })).toMatch(/skipped: python3 cannot import uid2_client/);
  });
});
