// bench/cpu-figures.mjs: µs per row per thread, the GC share and the window, from the report the CLI writes.
import { describe, expect, it } from 'vitest';
// @ts-expect-error a plain script of the bench, without types
import { cpuFigures, cpuNote } from '../../bench/cpu-figures.mjs';

const report = {
  cpu_source: '/proc/thread-self/stat',
  process_cpu_us: 9_000_000,
  main: { thread: 0, cpu_us: 3_000_000, gc_ms: 500, gc_count: 40 },
  threads: [
    { thread: 1, cpu_us: 2_000_000, gc_ms: 600, gc_count: 30 },
    { thread: 2, cpu_us: 2_500_000, gc_ms: 700, gc_count: 31 },
  ],
  window: { requests: 200, max_in_flight: 20, mean_in_flight: 13.26, window_ms: 2000 },
};

describe('cpuFigures', () => {
  it('divides each thread by the rows; the rest of the process is what no JS thread took', () => {
    const f = cpuFigures(report, 1_000_000);
    expect(f).toEqual({
      cpu_us_per_row: 9,
      main_us_per_row: 3,
      worker_us_per_row: [2, 2.5],
      other_us_per_row: 1.5,
      gc_us_per_row: 1.8,
      gc_share: 0.2,
      mean_in_flight: 13.3,
      max_in_flight: 20,
    });
    expect(cpuNote(f)).toBe(
      'CPU/row 9 µs: main 3, threads 2+2.5, other 1.5; GC pauses 1.8 µs (20%); in flight 13.3 (max 20)',
    );
  });

  it('leaves out the window when it never opened, and threads when there were none', () => {
    const f = cpuFigures({ ...report, threads: [], window: { ...report.window, mean_in_flight: null } }, 1000);
    expect(cpuNote(f)).toBe('CPU/row 9000 µs: main 3000, other 6000; GC pauses 500 µs (6%)');
  });

  it('says nothing for a case without a report', () => {
    expect(cpuNote({ rows: 5 })).toBe('');
  });
});
