// Where the CLI's CPU went, per row: the figures of the file the CLI writes when UID2_BATCH_BENCH_REPORT names it
// (dist/pipeline/workers/bench-report.js), and how the bench's tables show them.

const round = (n, digits) => (Number.isFinite(n) ? Number(n.toFixed(digits)) : null);

/**
 * µs of CPU per row: the main thread, each worker thread, the rest of the process (V8's GC helper and compiler
 * threads, libuv's pool), all together; GC pauses per row and as a share of all CPU; the request window. `report`
 * is the JSON the CLI wrote, `rows` the rows of the run.
 */
export function cpuFigures(report, rows) {
  const perRow = (us) => round(us / rows, 2);
  const workersUs = report.threads.reduce((sum, t) => sum + t.cpu_us, 0);
  const gcMs = report.main.gc_ms + report.threads.reduce((sum, t) => sum + t.gc_ms, 0);
  return {
    cpu_us_per_row: perRow(report.process_cpu_us),
    main_us_per_row: perRow(report.main.cpu_us),
    worker_us_per_row: report.threads.map((t) => perRow(t.cpu_us)),
    other_us_per_row: perRow(report.process_cpu_us - report.main.cpu_us - workersUs),
    gc_us_per_row: perRow(gcMs * 1000),
    gc_share: round((gcMs * 1000) / report.process_cpu_us, 3),
    mean_in_flight: round(report.window.mean_in_flight, 1),
    max_in_flight: report.window.max_in_flight,
  };
}

/**
 * One line for a case's notes: `CPU/row 9 µs: main 3, threads 2+2.5, other 1.5; GC pauses 1.8 µs (20%); in
 * flight 13.3 (max 20)`. GC pauses are wall time on the JS threads (with V8's helper threads working alongside),
 * so on a loaded machine their share of the CPU time can pass 100%.
 */
export function cpuNote(r) {
  if (r.cpu_us_per_row === undefined) return '';
  const threads = r.worker_us_per_row.length > 0 ? `, threads ${r.worker_us_per_row.join('+')}` : '';
  const share = r.gc_share === null ? 'n/a' : `${Math.round(r.gc_share * 100)}%`;
  const window = r.mean_in_flight === null ? '' : `; in flight ${r.mean_in_flight} (max ${r.max_in_flight})`;
  return `CPU/row ${r.cpu_us_per_row} µs: main ${r.main_us_per_row}${threads}, other ${r.other_us_per_row}; GC pauses ${r.gc_us_per_row} µs (${share})${window}`;
}
