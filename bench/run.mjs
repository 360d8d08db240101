#!/usr/bin/env node
// `npm run bench`: the performance figures of the CLI and the local service in one table, written to
// bench/results.json.
// Not a test: the figures depend on the machine (and on whatever else shares it), so the ratios say more than
// the absolute numbers. Inputs are generated once, seeded, under bench/data/ (gitignored).
//
//   npm run bench                          # everything (the 5M-entry remap state takes a few minutes)
//   npm run bench -- --skip-5m-state       # remap-due on a 1M-entry state instead
//   npm run bench -- --only map1m,hash     # some cases: map1m small mapQuoted map5m mapEmail mapState formats hash
//                                          # remap optout service window scaling python
//                                          # (small: 15k mixed rows, under 1 MB, where the default takes no row
//                                          # thread; `--only small --threads 0,1` weighs one against none)
//                                          # (window: 1M emails against serve --latency-ms 250, the mean of
//                                          # requests in flight; scaling: 1M mixed at --threads 1..3, one run
//                                          # each, `--scaling 1,2,3,4` for others; python: the official UID2
//                                          # Python client against map, 200k emails at 250 ms, see below)
//                                          # (formats: bench/formats.mjs, csv.gz, Parquet and
//                                          # national phones against plain CSV, in its own service)
//                                          # (mapQuoted: the 1M mixed rows unquoted and all-quoted, runs
//                                          # alternating, both medians and their ratio)
//   npm run bench -- --only nodes --nodes 20,22,24
//                                          # nodes: 1M mixed and 1M email-only rows mapped by the CLI on each
//                                          # Node version (default 20,22,24: this process's own when it
//                                          # matches, else installed once from the npm registry under
//                                          # bench/data/node/), runs alternating, CPU per row side by side
//   npm run bench -- --threads 0,1         # map and hash once per --threads value (default: default,0 = the
//                                          # CLI's default, then all on the main thread)
//   npm run bench -- --runs 1              # one run per case instead of the median of 3
//                                          # (mapState: the 1M mixed rows without a state, into a new
//                                          # state, and again from it, runs alternating, medians and ratios)
//   npm run bench -- --only mapState --state-into /tmp/uid2-batch-bench-remap/state-5000000.db
//                                          # map --state into a copy of a big kept state (bench/remap.mjs --keep)
//   UID2_BENCH_PYTHON=python3 PYTHONPATH=DIR npm run bench -- --only python
//                                          # the interpreter that imports uid2_client (default python3); without
//                                          # it the case is skipped with one line
//   npm run bench -- --window-rows 200000  # fewer emails for the window case (and --python-rows for python)
//   npm run bench -- --markdown            # the table in Markdown, as the README shows it
//   node bench/run.mjs --help              # this text; an option not listed here is refused
//   node bench/run.mjs --render-only [--markdown]   # run nothing: the tables of bench/results.json, one per run
//                                          # whose cases it still holds, each under that run's date and command
import { spawn, spawnSync } from 'node:child_process';
import { BIN, childEnv, cpuSecondsOf, ROOT, startServe, stopServe } from './processes.mjs';
import { hash as sha256 } from 'node:crypto';
import { once } from 'node:events';
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { cpuFigures } from './cpu-figures.mjs';
import { nodeBinary } from './node-versions.mjs';
import { mergeRuns, renderMarkdown, renderRuns, renderText } from './render.mjs';

const DATA = join(ROOT, 'bench', 'data');
const RESULTS = join(ROOT, 'bench', 'results.json');

const argv = process.argv.slice(2);
const flag = (name) => argv.includes(name);
const option = (name) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const ALL_CASES = [
  'map1m',
  'small',
  'mapQuoted',
  'map5m',
  'mapEmail',
  'mapState',
  'formats',
  'hash',
  'remap',
  'optout',
  'service',
  'window',
  'scaling',
  'python',
  'nodes',
];
// what takes a value, and what does not: anything else is refused, not ignored (a mistyped option would run the
// whole bench)
const VALUE_OPTIONS = [
  '--only',
  '--runs',
  '--threads',
  '--scaling',
  '--window-rows',
  '--python-rows',
  '--state-into',
  '--nodes',
];
const FLAGS = ['--skip-5m-state', '--markdown', '--render-only', '--help', '-h'];
const refuse = (message) => {
  console.error(`bench/run.mjs: ${message}; see node bench/run.mjs --help`);
  process.exit(2);
};
for (let i = 0; i < argv.length; i++) {
  if (VALUE_OPTIONS.includes(argv[i])) {
    if (argv[i + 1] === undefined || argv[i + 1].startsWith('--')) refuse(`${argv[i]} needs a value`);
    i++;
  } else if (!FLAGS.includes(argv[i])) refuse(`unknown option '${argv[i]}'`);
}
if (flag('--help') || flag('-h')) {
  // the usage is this file's opening comment
  const source = readFileSync(new URL(import.meta.url), 'utf8').split('\n');
  const comment = source.slice(
    1,
    source.findIndex((line, n) => n > 0 && !line.startsWith('//')),
  );
  console.log(comment.map((line) => line.replace(/^\/\/ ?/, '')).join('\n'));
  process.exit(0);
}
const ONLY = option('--only')?.split(',') ?? ALL_CASES;
const unknownCases = ONLY.filter((name) => !ALL_CASES.includes(name));
if (unknownCases.length > 0) refuse(`--only: no case '${unknownCases.join("', '")}' (cases: ${ALL_CASES.join(' ')})`);
const RUNS = Number(option('--runs') ?? 3);
// undefined: the CLI's own default (map: cores - 1, hash: one per core); 0: everything on the main thread
const THREADS = option('--threads')
  ?.split(',')
  .map((t) => (t === 'default' ? undefined : Number(t))) ?? [undefined, 0];
const SKIP_5M_STATE = flag('--skip-5m-state');
const SCALING = (option('--scaling') ?? '1,2,3').split(',').map(Number);
const WINDOW_ROWS = Number(option('--window-rows') ?? 1_000_000);
const PYTHON_ROWS = Number(option('--python-rows') ?? 200_000);
const NODES = (option('--nodes') ?? '20,22,24').split(',');
const badNode = NODES.find((v) => !/^\d+(\.\d+){0,2}$/.test(v));
if (badNode !== undefined) refuse(`--nodes: '${badNode}' is not a Node version (give e.g. 20,22,24 or 24.1.0)`);
// the service's delay before each answer in the window and python cases: what a real service's round trip costs
const LATENCY_MS = 250;
// a kept state (e.g. bench/remap.mjs --keep's) to map 1M rows into, copied first: `--state-into FILE`
const STATE_INTO = option('--state-into');
const MARKDOWN = flag('--markdown');
// the command shown above the Markdown table: the options of this run, without the rendering ones
const MARKDOWN_COMMAND = [
  'npm run bench',
  ...(argv.some((a) => a !== '--markdown' && a !== '--render-only') ? ['--'] : []),
]
  .concat(argv.filter((a) => a !== '--markdown' && a !== '--render-only'))
  .join(' ');

if (flag('--render-only')) {
  if (!existsSync(RESULTS)) {
    console.error(`bench/run.mjs: ${RESULTS} is missing; run \`npm run bench\` first`);
    process.exit(2);
  }
  console.log(renderRuns(JSON.parse(readFileSync(RESULTS, 'utf8')), MARKDOWN));
  process.exit(0);
}

if (!existsSync(join(ROOT, 'dist', 'cli', 'main.js'))) {
  console.error('bench/run.mjs: dist/ is missing; run `npm run build` first');
  process.exit(2);
}
mkdirSync(DATA, { recursive: true });
const WORK = join(DATA, 'work');
mkdirSync(WORK, { recursive: true });

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];
const fmt = (n) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : 'n/a');
const fmtRows = (n) => (n % 1e6 === 0 ? `${n / 1e6}M` : n % 1e3 === 0 ? `${n / 1e3}k` : String(n));

// --- inputs ------------------------------------------------------------------------------------------------------
/** `quote`: 'all' writes the same rows with every field quoted. */
async function input(rows, kind, quote = 'minimal') {
  const path = join(DATA, `${kind}${quote === 'all' ? '-quoted' : ''}-${rows}-seed42.csv`);
  if (!existsSync(path)) {
    process.stderr.write(
      `generating ${fmt(rows)} ${kind} rows${quote === 'all' ? ' (all quoted)' : ''} into ${path}...\n`,
    );
    const { writeRows } = await import(pathToFileURL(join(ROOT, 'bench', 'gen-input.mjs')).href);
    await writeRows({ rows, seed: 42, out: `${path}.part`, kind, quote });
    const { renameSync } = await import('node:fs');
    renameSync(`${path}.part`, path);
  }
  return path;
}

/** Raw UIDs have the shape of a 44-char base64 SHA-256; the service answers opt-out status for any such string. */
function rawUidFile(count) {
  const path = join(DATA, `raw-uids-${count}.csv`);
  if (!existsSync(path)) {
    let text = 'raw_uid\n';
    for (let i = 0; i < count; i++) text += `${sha256('sha256', `raw-uid-${i}`, 'base64')}\n`;
    writeFileSync(path, text);
  }
  return path;
}

// --- processes ---------------------------------------------------------------------------------------------------
// The CLI reports its own peak RSS (VmHWM), its CPU time, and its main thread's CPU time (/proc/self/task/PID)
// as it exits. On a shared machine the main thread's CPU says what worker threads took off the critical path
// even when the wall time cannot show it (no core free for them).
const REPORT = `data:text/javascript,${encodeURIComponent(
  // biome-ignore lint/suspicious/noTemplateCurlyInString: the child's own source, with its own template literals
  "import { readFileSync, writeSync } from 'node:fs'; process.on('exit', () => { const u = process.resourceUsage(); const m = /VmHWM:\\s+(\\d+)/.exec(readFileSync('/proc/self/status', 'utf8')); let main = NaN; try { const f = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8').split(') ')[1].split(' '); main = (Number(f[11]) + Number(f[12])) * 10000; } catch {} writeSync(2, `\\nBENCH_HWM_KB ${m ? m[1] : 'NaN'} CPU_US ${u.userCPUTime + u.systemCPUTime} MAIN_US ${main}\\n`); });",
)}`;

// the CLI's own account of its threads, GC and request window (src/pipeline/workers/bench-report.ts)
const CLI_REPORT = join(WORK, 'cli-report.json');

/**
 * Runs the built CLI; resolves with wall seconds, peak RSS (MB), CPU seconds of the CLI and of serve, and the
 * CLI's report of its threads.
 */
async function runCli(args, { serve, env = {}, okCodes = [0], node = process.execPath } = {}) {
  const serveCpu0 = serve ? cpuSecondsOf(serve.child.pid) : 0;
  rmSync(CLI_REPORT, { force: true });
  const started = process.hrtime.bigint();
  const child = spawn(node, ['--import', REPORT, BIN, ...args], {
    env: childEnv(WORK, { ...env, UID2_BATCH_BENCH_REPORT: CLI_REPORT }),
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const [code] = await once(child, 'close');
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  if (!okCodes.includes(code)) throw new Error(`uid2-batch ${args[0]} exited with ${code}: ${stderr.slice(-2000)}`);
  const m = /BENCH_HWM_KB (\d+) CPU_US (\d+) MAIN_US (\S+)/.exec(stderr);
  return {
    seconds,
    peakRssMb: m ? Number(m[1]) / 1024 : NaN,
    cpuS: m ? Number(m[2]) / 1e6 : NaN,
    mainThreadCpuS: m ? Number(m[3]) / 1e6 : NaN,
    serveCpuS: serve ? cpuSecondsOf(serve.child.pid) - serveCpu0 : 0,
    report: existsSync(CLI_REPORT) ? JSON.parse(readFileSync(CLI_REPORT, 'utf8')) : undefined,
  };
}

function credentials(serve) {
  return { UID2_API_KEY: serve.api_key, UID2_CLIENT_SECRET: serve.client_secret };
}

/** Median of `runs` runs by wall time; the figures of that run. */
async function medianRun(runs, once_) {
  const all = [];
  for (let i = 0; i < runs; i++) all.push(await once_());
  const m = median(all.map((r) => r.seconds));
  return { ...all.find((r) => r.seconds === m), all: all.map((r) => Number(r.seconds.toFixed(2))) };
}

// --- cases -------------------------------------------------------------------------------------------------------
const results = {};

function record(name, row) {
  results[name] = row;
  const figures = Object.entries(row)
    .filter(([k]) => k !== 'note')
    .map(([k, v]) => `${k}=${Array.isArray(v) ? v.join('/') : v}`)
    .join(' ');
  process.stderr.write(`  ${name}: ${figures}\n`);
}

const threadArgs = (t) => (t === undefined ? [] : ['--threads', String(t)]);
const DEFAULT_THREADS = {
  map: Math.min(3, Math.max(1, cpus().length - 1)),
  hash: Math.min(4, Math.max(1, cpus().length)),
};
const threadLabel = (t, command = 'map') =>
  t === undefined ? ` (default --threads ${DEFAULT_THREADS[command]})` : ` --threads ${t}`;

async function mapCase(serve, rows, kind, runs, threads, stateFrom) {
  const path = await input(rows, kind);
  const statePath = join(WORK, 'map-state.db');
  const stateArgs = stateFrom === undefined ? [] : ['--state', statePath];
  const freshState = () => {
    for (const suffix of ['', '-wal', '-shm', '.lock']) rmSync(statePath + suffix, { force: true });
    if (stateFrom !== undefined && stateFrom !== 'empty') copyFileSync(stateFrom, statePath);
  };
  const out = join(WORK, `mapped-${kind}-${rows}.csv`);
  const summary = join(WORK, `map-summary-${kind}-${rows}.json`);
  const r = await medianRun(runs, () => {
    if (stateFrom !== undefined) freshState();
    return runCli(
      [
        'map',
        path,
        '-o',
        out,
        '--base-url',
        serve.url,
        '--quiet',
        '--summary-json',
        summary,
        ...stateArgs,
        ...threadArgs(threads),
      ],
      {
        serve,
        env: credentials(serve),
        okCodes: [0, 3],
      },
    );
  });
  if (stateFrom !== undefined)
    for (const suffix of ['', '-wal', '-shm', '.lock']) rmSync(statePath + suffix, { force: true });
  const s = JSON.parse(readFileSync(summary, 'utf8'));
  if (s.rows !== rows) throw new Error(`map: expected ${rows} rows in the summary, got ${s.rows}`);
  const outMb = statSync(out).size / 1e6;
  rmSync(out, { force: true });
  return mapFigures(rows, r, s, outMb);
}

/** The figures of a map case from its chosen run `r` (with `all`, every run's wall seconds) and its summary `s`. */
function mapFigures(rows, r, s, outMb) {
  return {
    rows,
    seconds: Number(r.seconds.toFixed(2)),
    runs_s: r.all,
    rows_per_s: Math.round(rows / r.seconds),
    peak_rss_mb: Math.round(r.peakRssMb),
    cli_cpu_s: Number(r.cpuS.toFixed(2)),
    main_thread_cpu_s: Number(r.mainThreadCpuS.toFixed(2)),
    serve_cpu_s: Number(r.serveCpuS.toFixed(2)),
    rows_per_cli_cpu_s: Math.round(rows / r.cpuS),
    rows_per_main_thread_cpu_s: Math.round(rows / r.mainThreadCpuS),
    requests: s.requests,
    // distinct identifiers sent to the service (the rest were invalid, empty or repeats)
    items_sent: s.unique_identifiers,
    output_mb: Number(outMb.toFixed(1)),
    ...(r.report ? cpuFigures(r.report, rows) : {}),
  };
}

/**
 * map of the same rows by the CLI on each Node of `nodes` ({ binary, version }), runs alternating so every
 * version sees the same machine load. One row per version: the figures of its run of median CPU (the figure
 * compared here), its CPU per row as a multiple of the first version's, and whether every output of every
 * version is the same bytes (it must be).
 */
async function nodesCase(serve, rows, kind, runs, nodes) {
  const path = await input(rows, kind);
  const out = join(WORK, `mapped-nodes-${kind}-${rows}.csv`);
  const summary = join(WORK, `map-summary-nodes-${kind}-${rows}.json`);
  const runsOf = nodes.map(() => []);
  const digests = new Set();
  for (let i = 0; i < runs; i++) {
    for (let n = 0; n < nodes.length; n++) {
      const args = ['map', path, '-o', out, '--base-url', serve.url, '--quiet', '--summary-json', summary];
      const r = await runCli(args, { serve, env: credentials(serve), okCodes: [0, 3], node: nodes[n].binary });
      const s = JSON.parse(readFileSync(summary, 'utf8'));
      if (s.rows !== rows)
        throw new Error(`map on Node ${nodes[n].version}: ${s.rows} rows in the summary, not ${rows}`);
      runsOf[n].push({ ...r, summary: s, outMb: statSync(out).size / 1e6 });
      digests.add(sha256('sha256', readFileSync(out), 'hex'));
      rmSync(out, { force: true });
    }
  }
  const figures = runsOf.map((all) => {
    const m = median(all.map((r) => r.cpuS));
    const r = all.find((x) => x.cpuS === m);
    return mapFigures(rows, { ...r, all: all.map((x) => Number(x.seconds.toFixed(2))) }, r.summary, r.outMb);
  });
  return figures.map((f, n) => ({
    ...f,
    node_version: nodes[n].version,
    cpu_vs_first: Number((f.cli_cpu_s / figures[0].cli_cpu_s).toFixed(3)),
    first_node: nodes[0].version,
    same_output: digests.size === 1,
  }));
}

/**
 * The same 1M mixed rows as written (fields quoted only when they must be) and with every field quoted, runs
 * alternating so both see the same machine load; each side's median, their ratio, and whether both outputs are
 * the same bytes (they should be: the input cells are the same strings, and the output quotes only what it must).
 */
async function mapQuotedCase(serve, rows, runs, threads) {
  const paths = { plain: await input(rows, 'mixed'), quoted: await input(rows, 'mixed', 'all') };
  const runsOf = { plain: [], quoted: [] };
  const digests = { plain: new Set(), quoted: new Set() };
  for (let i = 0; i < runs; i++) {
    for (const side of ['plain', 'quoted']) {
      const out = join(WORK, `mapped-${side}-${rows}.csv`);
      const summary = join(WORK, `map-summary-${side}-${rows}.json`);
      const args = [
        'map',
        paths[side],
        '-o',
        out,
        '--base-url',
        serve.url,
        '--quiet',
        '--summary-json',
        summary,
        ...threadArgs(threads),
      ];
      runsOf[side].push(await runCli(args, { serve, env: credentials(serve), okCodes: [0, 3] }));
      const s = JSON.parse(readFileSync(summary, 'utf8'));
      if (s.rows !== rows) throw new Error(`map: expected ${rows} rows in the summary, got ${s.rows}`);
      digests[side].add(sha256('sha256', readFileSync(out), 'hex'));
      rmSync(out, { force: true });
    }
  }
  const side = (name) => {
    const m = median(runsOf[name].map((r) => r.seconds));
    const r = runsOf[name].find((x) => x.seconds === m);
    return {
      seconds: m,
      runs: runsOf[name].map((x) => Number(x.seconds.toFixed(2))),
      cpuS: r.cpuS,
      mainS: r.mainThreadCpuS,
    };
  };
  const plain = side('plain');
  const quoted = side('quoted');
  return {
    rows,
    seconds: Number(quoted.seconds.toFixed(2)),
    runs_s: quoted.runs,
    rows_per_s: Math.round(rows / quoted.seconds),
    cli_cpu_s: Number(quoted.cpuS.toFixed(2)),
    main_thread_cpu_s: Number(quoted.mainS.toFixed(2)),
    unquoted_rows_per_s: Math.round(rows / plain.seconds),
    unquoted_runs_s: plain.runs,
    unquoted_cli_cpu_s: Number(plain.cpuS.toFixed(2)),
    unquoted_main_thread_cpu_s: Number(plain.mainS.toFixed(2)),
    quoted_vs_unquoted: Number((plain.seconds / quoted.seconds).toFixed(3)),
    same_output:
      digests.plain.size === 1 && digests.quoted.size === 1 && [...digests.plain][0] === [...digests.quoted][0],
  };
}

/**
 * map --state side by side with the same map without a state, runs alternating so all three see the same machine
 * load: without a state, into a new state file, and the same command again (everything answered from the state).
 * Each side's median, its speed as a share of the run without a state, and whether all outputs are the same bytes.
 */
async function mapStateCase(serve, rows, runs, threads) {
  const path = await input(rows, 'mixed');
  const statePath = join(WORK, 'map-state-case.db');
  const removeState = () => {
    for (const suffix of ['', '-wal', '-shm', '.lock']) rmSync(statePath + suffix, { force: true });
  };
  const sides = ['none', 'new', 'again'];
  const runsOf = { none: [], new: [], again: [] };
  const digests = new Set();
  try {
    for (let i = 0; i < runs; i++) {
      removeState();
      for (const side of sides) {
        const out = join(WORK, `mapped-state-${side}-${rows}.csv`);
        const summary = join(WORK, `map-summary-state-${side}-${rows}.json`);
        const args = ['map', path, '-o', out, '--base-url', serve.url, '--quiet', '--summary-json', summary];
        if (side !== 'none') args.push('--state', statePath);
        runsOf[side].push(await runCli([...args, ...threadArgs(threads)], { serve, env: credentials(serve) }));
        const s = JSON.parse(readFileSync(summary, 'utf8'));
        if (s.rows !== rows) throw new Error(`map: expected ${rows} rows in the summary, got ${s.rows}`);
        if (side === 'again' && s.requests !== 0) throw new Error(`map --state again sent ${s.requests} requests`);
        digests.add(sha256('sha256', readFileSync(out), 'hex'));
        rmSync(out, { force: true });
      }
    }
  } finally {
    removeState();
  }
  const side = (name) => {
    const m = median(runsOf[name].map((r) => r.seconds));
    const r = runsOf[name].find((x) => x.seconds === m);
    return { seconds: m, runs: runsOf[name].map((x) => Number(x.seconds.toFixed(2))), r };
  };
  const none = side('none');
  const row = {
    rows,
    no_state_rows_per_s: Math.round(rows / none.seconds),
    no_state_runs_s: none.runs,
    no_state_cli_cpu_s: Number(none.r.cpuS.toFixed(2)),
    same_output: digests.size === 1,
  };
  for (const name of ['new', 'again']) {
    const x = side(name);
    row[`${name}_rows_per_s`] = Math.round(rows / x.seconds);
    row[`${name}_runs_s`] = x.runs;
    row[`${name}_cli_cpu_s`] = Number(x.r.cpuS.toFixed(2));
    row[`${name}_main_thread_cpu_s`] = Number(x.r.mainThreadCpuS.toFixed(2));
    row[`${name}_peak_rss_mb`] = Math.round(x.r.peakRssMb);
    // above 1: faster than the same run without a state
    row[`${name}_vs_no_state`] = Number((none.seconds / x.seconds).toFixed(3));
  }
  return row;
}

async function hashCase(rows, runs, threads) {
  const path = await input(rows, 'mixed');
  const out = join(WORK, `hashed-${rows}.csv`);
  const r = await medianRun(runs, () => runCli(['hash', path, '-o', out, '--quiet', ...threadArgs(threads)]));
  rmSync(out, { force: true });
  return {
    rows,
    seconds: Number(r.seconds.toFixed(2)),
    runs_s: r.all,
    rows_per_s: Math.round(rows / r.seconds),
    peak_rss_mb: Math.round(r.peakRssMb),
    cli_cpu_s: Number(r.cpuS.toFixed(2)),
    main_thread_cpu_s: Number(r.mainThreadCpuS.toFixed(2)),
    rows_per_main_thread_cpu_s: Math.round(rows / r.mainThreadCpuS),
    ...(r.report ? cpuFigures(r.report, rows) : {}),
  };
}

async function optoutCase(serve, count, runs) {
  const path = rawUidFile(count);
  const out = join(WORK, 'optout.csv');
  const r = await medianRun(runs, () =>
    runCli(['optout-check', path, '-o', out, '--base-url', serve.url, '--quiet'], {
      serve,
      env: credentials(serve),
      okCodes: [0],
    }),
  );
  rmSync(out, { force: true });
  return {
    raw_uids: count,
    seconds: Number(r.seconds.toFixed(2)),
    runs_s: r.all,
    raw_uids_per_s: Math.round(count / r.seconds),
    peak_rss_mb: Math.round(r.peakRssMb),
    serve_cpu_s: Number(r.serveCpuS.toFixed(2)),
  };
}

/**
 * The local service alone: v3 map requests of 5,000 prepared hashes from this process (20 in flight) against
 * serve in its own process; serve's CPU time per item gives its rate per core, whatever this process costs.
 */
async function serviceCase(serve, requests) {
  const { createServiceClient } = await import(pathToFileURL(join(ROOT, 'dist', 'client', 'index.js')).href);
  const client = createServiceClient({ baseUrl: serve.url, apiKey: serve.api_key, clientSecret: serve.client_secret });
  const bodies = [];
  for (let b = 0; b < 8; b++) {
    const email_hash = [];
    for (let i = 0; i < 5000; i++) email_hash.push(sha256('sha256', `svc-${b}-${i}`, 'base64'));
    bodies.push({ email_hash });
  }
  try {
    // warm-up: JIT and connections
    await Promise.all(bodies.map((b) => client.mapV3(b)));
    const cpu0 = cpuSecondsOf(serve.child.pid);
    const started = process.hrtime.bigint();
    let next = 0;
    const worker = async () => {
      while (next < requests) {
        const i = next++;
        await client.mapV3(bodies[i % bodies.length]);
      }
    };
    await Promise.all(Array.from({ length: 20 }, worker));
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    const serveCpu = cpuSecondsOf(serve.child.pid) - cpu0;
    const items = requests * 5000;
    return {
      items,
      seconds: Number(seconds.toFixed(2)),
      items_per_s: Math.round(items / seconds),
      serve_cpu_s: Number(serveCpu.toFixed(2)),
      items_per_serve_cpu_s: Math.round(items / serveCpu),
    };
  } finally {
    await client.close();
  }
}

/** bench/remap.mjs in its own process (it builds the state through dist/state and starts its own serve). */
async function remapCase(entries) {
  const child = spawn(process.execPath, [join(ROOT, 'bench', 'remap.mjs'), String(entries)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let stdout = '';
  child.stdout.on('data', (d) => (stdout += d));
  const [code] = await once(child, 'close');
  if (code !== 0) throw new Error(`bench/remap.mjs exited with ${code}`);
  const json = JSON.parse(stdout.slice(stdout.indexOf('\n{') + 1));
  return {
    entries,
    due: json.due,
    build_s: Number(json.build_s.toFixed(1)),
    count_due_ms: Number(json.count_due_ms.toFixed(1)),
    select_due_ms: Number(json.select_due_ms.toFixed(1)),
    full_scan_ms: Number(json.full_scan_ms.toFixed(0)),
    remap_total_s: Number(json.remap.wall_s.toFixed(2)),
    remap_peak_rss_mb: Math.round(json.remap.peak_rss_mib),
    second_run_s: Number(json.second_run_s.toFixed(2)),
  };
}

/**
 * The official UID2 Python client as its docs show it (IdentityMapV3Client, sequential 5,000-email batches) and
 * `uid2-batch map` on the same valid emails against the same service, runs alternating; the ratio of their median
 * wall times. Skipped, with the reason, when the interpreter (UID2_BENCH_PYTHON, default python3, with the
 * caller's PYTHONPATH) cannot import uid2_client.
 */
async function pythonCase(serve, rows, runs) {
  const interpreter = process.env.UID2_BENCH_PYTHON || 'python3';
  const probe = spawnSync(interpreter, ['-c', 'import uid2_client'], { env: process.env, encoding: 'utf8' });
  if (probe.status !== 0)
    return { skipped: `${interpreter} cannot import uid2_client (set UID2_BENCH_PYTHON and PYTHONPATH)` };
  const path = cleanEmailFile(rows);
  const out = join(WORK, `mapped-python-side-${rows}.csv`);
  const times = { python: [], map: [] };
  for (let i = 0; i < runs; i++) {
    const started = process.hrtime.bigint();
    const child = spawn(interpreter, [join(ROOT, 'bench', 'python-map.py'), serve.url, path], {
      env: { ...process.env, ...credentials(serve) },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let stdout = '';
    child.stdout.on('data', (d) => (stdout += d));
    const [code] = await once(child, 'close');
    if (code !== 0) throw new Error(`bench/python-map.py exited with ${code}`);
    times.python.push(Number(process.hrtime.bigint() - started) / 1e9);
    const mapped = JSON.parse(stdout).mapped;
    if (mapped !== rows) throw new Error(`python: expected ${rows} mapped, got ${mapped}`);
    const r = await runCli(['map', path, '-o', out, '--base-url', serve.url, '--quiet'], {
      serve,
      env: credentials(serve),
    });
    times.map.push(r.seconds);
    rmSync(out, { force: true });
  }
  const python = median(times.python);
  const map = median(times.map);
  return {
    rows,
    python_s: Number(python.toFixed(2)),
    python_runs_s: times.python.map((t) => Number(t.toFixed(2))),
    map_s: Number(map.toFixed(2)),
    map_runs_s: times.map.map((t) => Number(t.toFixed(2))),
    map_vs_python: Number((python / map).toFixed(1)),
  };
}

/** `rows` distinct valid email addresses (the Python client refuses an invalid one), one column. */
function cleanEmailFile(rows) {
  const path = join(DATA, `clean-emails-${rows}.csv`);
  if (!existsSync(path)) {
    const lines = ['email'];
    for (let i = 0; i < rows; i++) lines.push(`person.${i}@example${i % 97}.com`);
    writeFileSync(path, `${lines.join('\n')}\n`);
  }
  return path;
}

// --- main --------------------------------------------------------------------------------------------------------
const machine = {
  date: new Date().toISOString(),
  cores: cpus().length,
  cpu_model: (/model name\s*:\s*(.*)/.exec(readFileSync('/proc/cpuinfo', 'utf8')) ?? [])[1] ?? cpus()[0]?.model,
  memory_gib: Math.round(totalmem() / 2 ** 30),
  node: process.version,
  load_avg_at_start: Number(loadavg()[0].toFixed(2)),
};
process.stderr.write(
  `bench: ${machine.cores} cores (${machine.cpu_model}), Node ${machine.node}, load ${machine.load_avg_at_start}\n`,
);

const serve = await startServe(WORK);
try {
  if (ONLY.some((c) => c.startsWith('map') || c === 'scaling')) {
    // a long-running service has its code optimized and its salts cached: one unmeasured run gets it there, so
    // the first measured case does not pay for the service's warm-up
    process.stderr.write('warming up the service with one unmeasured map run...\n');
    await mapCase(serve, 1_000_000, 'mixed', 1, undefined);
  }
  for (const t of THREADS) {
    if (ONLY.includes('map1m'))
      record(`map 1M mixed${threadLabel(t)}`, await mapCase(serve, 1_000_000, 'mixed', RUNS, t));
    if (ONLY.includes('small'))
      record(
        // under 1 MB the CLI's default is no row thread, whatever the machine
        `map 15k mixed (under 1 MB)${t === undefined ? ' (default: no thread)' : threadLabel(t)}`,
        await mapCase(serve, 15_000, 'mixed', RUNS, t),
      );
    if (ONLY.includes('mapQuoted'))
      record(`map 1M mixed all-quoted${threadLabel(t)}`, await mapQuotedCase(serve, 1_000_000, RUNS, t));
    if (ONLY.includes('mapEmail'))
      record(`map 1M email-only${threadLabel(t)}`, await mapCase(serve, 1_000_000, 'email', RUNS, t));
    if (ONLY.includes('mapState'))
      record(
        `map 1M mixed --state (new file, then again)${threadLabel(t)}`,
        await mapStateCase(serve, 1_000_000, RUNS, t),
      );
    if (ONLY.includes('mapState') && STATE_INTO !== undefined) {
      record(
        `map 1M mixed --state (copy of a kept state)${threadLabel(t)}`,
        await mapCase(serve, 1_000_000, 'mixed', 1, t, STATE_INTO),
      );
    }
    if (ONLY.includes('map5m')) record(`map 5M mixed${threadLabel(t)}`, await mapCase(serve, 5_000_000, 'mixed', 1, t));
    if (ONLY.includes('hash')) record(`hash 1M mixed${threadLabel(t, 'hash')}`, await hashCase(1_000_000, RUNS, t));
  }
  if (ONLY.includes('scaling'))
    for (const t of SCALING)
      record(`map 1M mixed --threads ${t} (scaling)`, {
        ...(await mapCase(serve, 1_000_000, 'mixed', 1, t)),
        scaling_threads: t,
      });
  if (ONLY.includes('optout')) record('optout-check 100k raw UIDs', await optoutCase(serve, 100_000, RUNS));
  if (ONLY.includes('service')) record('service v3 map (load from bench)', await serviceCase(serve, 200));
} finally {
  await stopServe(serve);
}
if (ONLY.includes('nodes')) {
  // before its serve starts: an install from the registry is not timed, and the service warms up after it
  let nodes;
  try {
    nodes = NODES.map((v) => nodeBinary(v, DATA));
  } catch (err) {
    console.error(`bench/run.mjs: ${err.message}`);
    process.exit(1);
  }
  const nodeServe = await startServe(WORK);
  try {
    process.stderr.write('warming up the service with one unmeasured map run...\n');
    await mapCase(nodeServe, 1_000_000, 'mixed', 1, undefined);
    for (const [kind, label] of [
      ['mixed', 'mixed'],
      ['email', 'email-only'],
    ]) {
      const rows = await nodesCase(nodeServe, 1_000_000, kind, RUNS, nodes);
      for (const row of rows) record(`map 1M ${label} on Node ${row.node_version}${threadLabel(undefined)}`, row);
    }
  } finally {
    await stopServe(nodeServe);
  }
}
if (ONLY.includes('window') || ONLY.includes('python')) {
  const slow = await startServe(WORK, ['--latency-ms', String(LATENCY_MS)]);
  try {
    if (ONLY.includes('window'))
      record(
        `map ${fmtRows(WINDOW_ROWS)} email-only, serve --latency-ms ${LATENCY_MS}`,
        await mapCase(slow, WINDOW_ROWS, 'email', RUNS, undefined),
      );
    if (ONLY.includes('python')) {
      const python = await pythonCase(slow, PYTHON_ROWS, RUNS);
      if (python.skipped) process.stderr.write(`  python: skipped, ${python.skipped}\n`);
      record(`official Python client against map, ${fmtRows(PYTHON_ROWS)} emails at ${LATENCY_MS} ms`, python);
    }
  } finally {
    await stopServe(slow);
  }
}
if (ONLY.includes('formats')) {
  // its own script and service: the cases alternate run by run, so their ratios to plain CSV are side by side
  const child = spawn(
    process.execPath,
    [join(ROOT, 'bench', 'formats.mjs'), '--rows', '1000000', '--runs', String(RUNS)],
    { stdio: ['ignore', 'inherit', 'inherit'] },
  );
  const [code] = await once(child, 'close');
  if (code !== 0) throw new Error(`bench/formats.mjs exited with ${code}`);
  const { figures } = JSON.parse(readFileSync(join(ROOT, 'bench', 'results-formats.json'), 'utf8'));
  for (const { name, ...row } of figures)
    record(`map 1M mixed ${name}`, { ...row, note: `${row.vs_plain_csv}x plain` });
}
if (ONLY.includes('remap')) {
  const entries = SKIP_5M_STATE ? 1_000_000 : 5_000_000;
  record(`remap-due ${entries / 1e6}M-entry state, 1/365 due`, await remapCase(entries));
}

// the service must serve at least 3x what one core of the client sends
const mapRow = Object.entries(results).find(([k]) => k.startsWith('map 1M mixed'))?.[1];
const svc = results['service v3 map (load from bench)'];
if (mapRow && svc) {
  const clientItemsPerCpuS = mapRow.items_sent / mapRow.cli_cpu_s;
  results.service_vs_client = {
    service_items_per_core_s: svc.items_per_serve_cpu_s,
    client_rows_per_core_s: mapRow.rows_per_cli_cpu_s,
    ratio_items_vs_client_rows: Number((svc.items_per_serve_cpu_s / mapRow.rows_per_cli_cpu_s).toFixed(1)),
    ratio_items_vs_client_items: Number((svc.items_per_serve_cpu_s / clientItemsPerCpuS).toFixed(1)),
  };
}

const previous =
  existsSync(RESULTS) && ONLY.length < ALL_CASES.length ? JSON.parse(readFileSync(RESULTS, 'utf8')) : undefined;
const output = mergeRuns(previous, { machine, command: MARKDOWN_COMMAND, results });
writeFileSync(RESULTS, `${JSON.stringify(output, null, 2)}\n`);

// --- the table ---------------------------------------------------------------------------------------------------
// this run's cases only: figures of an earlier run kept in the file were measured on another day
const thisRun = { machine, results };
console.log(MARKDOWN ? `\n${renderMarkdown(thisRun, MARKDOWN_COMMAND)}` : renderText(thisRun));
console.log(`written: ${RESULTS}`);
