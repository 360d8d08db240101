// The tables of `npm run bench`: plain text for the terminal, Markdown for the README (both from the figures that
// bench/run.mjs writes to bench/results.json), so the README's table is what the bench printed, never typed in.

import { cpuNote } from './cpu-figures.mjs';

const fmt = (n) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : 'n/a');

/** The cases of a results object, in the order they ran: `{ name, ...figures }`. */
export function casesOf(results) {
  return Object.entries(results)
    .filter(([name]) => name !== 'service_vs_client')
    .map(([name, row]) => ({ name, ...row }));
}

const rateOf = (r) => r.rows_per_s ?? r.raw_uids_per_s ?? r.items_per_s;
const unitOf = (r) => (r.rows_per_s !== undefined ? 'rows' : r.raw_uids_per_s !== undefined ? 'raw UIDs' : 'items');

/** What a case's figures say beyond its rate, CPU and memory; `withRuns`: each run's wall seconds too. */
function notesOf(r, withRuns) {
  const runs = (xs) => (withRuns ? ` (runs ${xs.join('/')})` : '');
  let notes = withRuns && r.runs_s ? `runs ${r.runs_s.join('/')}` : '';
  if (r.quoted_vs_unquoted !== undefined) {
    notes = `${notes ? `${notes}; ` : ''}unquoted ${fmt(r.unquoted_rows_per_s)}/s${runs(r.unquoted_runs_s)}: quoted at ${r.quoted_vs_unquoted}x, output ${r.same_output ? 'the same bytes' : 'DIFFERS'}`;
  }
  if (r.select_due_ms !== undefined)
    notes = `${fmt(r.due)} due: select ${r.select_due_ms} ms, count ${r.count_due_ms} ms (full scan ${r.full_scan_ms} ms); build ${r.build_s} s`;
  if (r.items_per_serve_cpu_s !== undefined) notes = `${fmt(r.items_per_serve_cpu_s)} items per serve CPU s`;
  if (r.again_vs_no_state !== undefined) {
    notes =
      `no state ${fmt(r.no_state_rows_per_s)}/s${runs(r.no_state_runs_s)}; ` +
      `new state ${fmt(r.new_rows_per_s)}/s (${r.new_vs_no_state}x${withRuns ? `, runs ${r.new_runs_s.join('/')}` : ''}); ` +
      `again ${fmt(r.again_rows_per_s)}/s (${r.again_vs_no_state}x${withRuns ? `, runs ${r.again_runs_s.join('/')}` : ''}); ` +
      `output ${r.same_output ? 'the same bytes' : 'DIFFERS'}`;
  }
  if (r.vs_plain_csv !== undefined)
    notes = `${r.vs_plain_csv}x the plain CSV rate of the same rounds${notes ? `; ${notes}` : ''}`;
  if (r.cpu_vs_first !== undefined)
    notes = `CPU ${r.cpu_vs_first}x that on Node ${r.first_node}, output ${r.same_output ? 'the same bytes on every Node' : 'DIFFERS'}${notes ? `; ${notes}` : ''}`;
  if (r.skipped !== undefined) notes = `skipped: ${r.skipped}`;
  if (r.map_vs_python !== undefined)
    notes = `the Python client ${r.python_s} s${runs(r.python_runs_s)}, map ${r.map_s} s${runs(r.map_runs_s)}: ${r.map_vs_python}x`;
  const cpu = cpuNote(r);
  if (cpu) notes = `${notes ? `${notes}; ` : ''}${cpu}`;
  return notes;
}

/** The scaling cases (`map ... --threads N (scaling)`) as one table: CPU per row by thread, per --threads. */
export function scalingLines(results, markdown) {
  const rows = casesOf(results).filter((r) => r.scaling_threads !== undefined);
  if (rows.length === 0) return [];
  const head = ['--threads', 'rows/s', 'CPU µs/row', 'main', 'worker threads', 'other', 'GC pauses', 'wall s'];
  const cells = (r) => [
    String(r.scaling_threads),
    fmt(r.rows_per_s),
    String(r.cpu_us_per_row ?? 'n/a'),
    String(r.main_us_per_row ?? 'n/a'),
    r.worker_us_per_row?.join(' + ') ?? 'n/a',
    String(r.other_us_per_row ?? 'n/a'),
    String(r.gc_us_per_row ?? 'n/a'),
    String(r.seconds),
  ];
  if (markdown)
    return [
      '',
      'Scaling, CPU per row of each thread (µs):',
      '',
      `| ${head.join(' | ')} |`,
      `|${head.map(() => '---').join('|')}|`,
      ...rows.map((r) => `| ${cells(r).join(' | ')} |`),
    ];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => cells(r)[i].length)));
  const line = (xs) => xs.map((x, i) => x.padStart(widths[i])).join('  ');
  return ['', 'scaling, CPU per row of each thread (µs):', line(head), ...rows.map((r) => line(cells(r)))];
}

function serviceLine(results) {
  const s = results.service_vs_client;
  if (!s) return undefined;
  return `service ${fmt(s.service_items_per_core_s)} items/core-s vs client ${fmt(s.client_rows_per_core_s)} rows/core-s: ${s.ratio_items_vs_client_rows}x (per item sent: ${s.ratio_items_vs_client_items}x)`;
}

/** The terminal's table: one line per case, each run's seconds in the notes. */
export function renderText({ machine, results }) {
  const lines = [
    '',
    `uid2-batch bench, ${machine.date.slice(0, 10)}: ${machine.cores} cores, ${machine.cpu_model}, Node ${machine.node}`,
    `${'case'.padEnd(40)} ${'per s'.padStart(10)} ${'wall s'.padStart(8)} ${'peak RSS'.padStart(9)} ${'CPU s'.padStart(6)} ${'main thr'.padStart(8)} ${'serve CPU'.padStart(9)}  notes`,
  ];
  for (const r of casesOf(results)) {
    const rss = r.peak_rss_mb ?? r.remap_peak_rss_mb;
    const rate = rateOf(r);
    lines.push(
      `${r.name.padEnd(40)} ${(rate !== undefined ? fmt(rate) : '').padStart(10)} ${String(r.seconds ?? r.remap_total_s ?? '').padStart(8)} ${(rss !== undefined ? `${rss} MB` : '').padStart(9)} ${String(r.cli_cpu_s ?? '').padStart(6)} ${String(r.main_thread_cpu_s ?? '').padStart(8)} ${String(r.serve_cpu_s ?? '').padStart(9)}  ${notesOf(r, true)}`,
    );
  }
  lines.push(...scalingLines(results, false));
  const service = serviceLine(results);
  if (service) lines.push(service);
  return lines.join('\n');
}

/** The README's table: the machine and the command above it, one row per case. */
export function renderMarkdown({ machine, results }, command) {
  const runs = Math.max(1, ...casesOf(results).map((r) => r.runs_s?.length ?? 1));
  const lines = [
    `\`${command}\`, ${machine.date.slice(0, 16).replace('T', ' ')} UTC: ${machine.cores} cores (${machine.cpu_model}), ` +
      `${machine.memory_gib} GiB, Node ${machine.node}, load ${machine.load_avg_at_start} at the start; ` +
      `${runs > 1 ? `the median of ${runs} runs of each case that repeats` : 'one run of each case'}.`,
    '',
    '| case | per second | wall s | peak RSS | CPU s (main thread) | serve CPU s | notes |',
    '|---|---|---|---|---|---|---|',
  ];
  for (const r of casesOf(results)) {
    const rate = rateOf(r);
    const rss = r.peak_rss_mb ?? r.remap_peak_rss_mb;
    const cpu =
      r.cli_cpu_s === undefined
        ? ''
        : `${r.cli_cpu_s}${r.main_thread_cpu_s !== undefined ? ` (${r.main_thread_cpu_s})` : ''}`;
    lines.push(
      `| ${r.name} | ${rate !== undefined ? `${fmt(rate)} ${unitOf(r)}` : ''} | ${r.seconds ?? r.remap_total_s ?? ''} | ${rss !== undefined ? `${rss} MB` : ''} | ${cpu} | ${r.serve_cpu_s ?? ''} | ${notesOf(r, false)} |`,
    );
  }
  lines.push(...scalingLines(results, true));
  const service = serviceLine(results);
  if (service) lines.push('', `The local service against the client: ${service}.`);
  return lines.join('\n');
}

/**
 * The results file after this run: the cases of `previous` (an earlier file, or undefined) that this run did not
 * measure again, each still under the machine, date and command of the run that measured it, then this run's.
 * `runs` lists each run with its cases, so that a table printed again never labels a case with another run's date.
 */
export function mergeRuns(previous, current) {
  const earlier =
    previous === undefined ? [] : (previous.runs ?? [{ ...previous, cases: Object.keys(previous.results) }]);
  const runs = [];
  for (const run of earlier) {
    const cases = run.cases.filter((name) => !(name in current.results) && name in previous.results);
    if (cases.length > 0) runs.push({ machine: run.machine, command: run.command, cases });
  }
  runs.push({ machine: current.machine, command: current.command, cases: Object.keys(current.results) });
  const results = {};
  for (const run of runs)
    for (const name of run.cases)
      results[name] = name in current.results ? current.results[name] : previous.results[name];
  return { machine: current.machine, command: current.command, results, runs };
}

/** Every run of a results file, each as its own table under its own machine and command (oldest first). */
export function renderRuns(file, markdown) {
  const runs = file.runs ?? [{ machine: file.machine, command: file.command, cases: Object.keys(file.results) }];
  return runs
    .map((run) => {
      const results = Object.fromEntries(
        run.cases.filter((name) => name in file.results).map((name) => [name, file.results[name]]),
      );
      const part = { machine: run.machine, results };
      return markdown ? renderMarkdown(part, run.command ?? 'npm run bench') : renderText(part);
    })
    .join('\n\n');
}
