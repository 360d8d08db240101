#!/usr/bin/env node
// map 1M mixed rows from plain CSV, from .csv.gz to .csv.gz, from Parquet (to CSV and to Parquet), and with
// --phone-region US on the same rows with their US phones in national writings, against `serve` in its own
// process: wall time, rows/s, peak RSS and CPU of the CLI, and the ratio to the plain CSV run measured in the
// same interleaved rounds. Not a test: the figures depend on the machine. Needs a build (npm run build).
//
//   node bench/formats.mjs [--rows 1000000] [--runs 3]   (figures also to bench/results-formats.json)
//   node bench/formats.mjs --before DIR   also runs the Parquet cases with the CLI of another build (DIR holds
//   its bin/ and dist/, e.g. a copy of them made before a change), interleaved with these, for a before/after
//   node bench/formats.mjs --args "--threads 2"   also runs the plain CSV and the national-phones cases with
//   these extra arguments (may be given more than once), interleaved with the others; with --before, also with
//   the other build
//   node bench/formats.mjs --only plain,national   only these cases (plain, gz, parquet-csv, parquet, national);
//   the plain CSV case always runs, as the base of the ratios
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createReadStream, createWriteStream, existsSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import { openSource } from '../dist/pipeline/io/source.js';
import { settleInput } from '../dist/pipeline/jobs/run-input.js';
import { openParquetSink } from '../dist/pipeline/io/parquet/parquet-sink.js';
import { BIN, ROOT, childEnv, startServe, stopServe } from './processes.mjs';
import { DATA, numberOption, WORK } from './args.mjs';

const ROWS = numberOption('--rows', 1_000_000);
const RUNS = numberOption('--runs', 3);
const argv = process.argv.slice(2);
const BEFORE = argv.includes('--before') ? join(argv[argv.indexOf('--before') + 1], 'bin', 'uid2-batch.js') : undefined;
/** Every value of a flag that may be given more than once. */
const valuesOf = (flag) => argv.flatMap((a, i) => (a === flag && i + 1 < argv.length ? [argv[i + 1]] : []));
const EXTRA_ARGS = valuesOf('--args').map((text) => text.split(/\s+/).filter((a) => a.length > 0));
const ONLY = argv.includes('--only') ? new Set(argv[argv.indexOf('--only') + 1].split(',')) : undefined;

// peak RSS (VmHWM) and CPU time, reported by the CLI process itself as it exits
const REPORT = `data:text/javascript,${encodeURIComponent(
  // biome-ignore lint/suspicious/noTemplateCurlyInString: the child's own source, with its own template literals
  "import { readFileSync, writeSync } from 'node:fs'; process.on('exit', () => { const u = process.resourceUsage(); const m = /VmHWM:\\s+(\\d+)/.exec(readFileSync('/proc/self/status', 'utf8')); writeSync(2, `\\nBENCH_HWM_KB ${m ? m[1] : 'NaN'} CPU_US ${u.userCPUTime + u.systemCPUTime}\\n`); });",
)}`;

async function inputs() {
  const csv = join(DATA, `mixed-${ROWS}.csv`);
  if (!existsSync(csv)) {
    const gen = spawn(
      process.execPath,
      [join(ROOT, 'bench', 'gen-input.mjs'), '--rows', String(ROWS), '--seed', '42', '--out', csv],
      { stdio: 'inherit' },
    );
    const [code] = await once(gen, 'close');
    if (code !== 0) throw new Error('gen-input failed');
  }
  const gz = `${csv}.gz`;
  if (!existsSync(gz)) await pipeline(createReadStream(csv), createGzip(), createWriteStream(gz));
  const parquet = csv.replace(/\.csv$/, '.parquet');
  if (!existsSync(parquet)) {
    const source = await openSource({ path: csv, ...(await settleInput([csv], {})).reading, format: 'csv' });
    const sink = await openParquetSink({ path: parquet, format: 'parquet', header: source.header });
    for await (const chunk of source.rows()) await sink.writeRows(chunk.map((r) => r.cells));
    await sink.commit();
  }
  const national = csv.replace(/\.csv$/, '-national.csv');
  if (!existsSync(national)) await writeNational(csv, national);
  return { csv, gz, parquet, national };
}

/** The ways people write a US number; each maps to the same E.164 number, so the runs send the same hashes. */
const WRITINGS = [
  (a, x, l) => `(${a}) ${x}-${l}`,
  (a, x, l) => `${a}-${x}-${l}`,
  (a, x, l) => `${a}.${x}.${l}`,
  (a, x, l) => `1 ${a} ${x} ${l}`,
];

/** The CSV with every US phone (`+1` and ten digits, a whole cell) in one of WRITINGS, in turn. */
async function writeNational(csv, out) {
  const tmp = `${out}.tmp`;
  const sink = createWriteStream(tmp);
  let n = 0;
  for await (const line of createInterface({ input: createReadStream(csv), crlfDelay: Number.POSITIVE_INFINITY })) {
    const text = line.replace(
      /,\+1(\d{3})(\d{3})(\d{4})(?=,|$)/,
      (_, a, x, l) => `,${WRITINGS[n++ % WRITINGS.length](a, x, l)}`,
    );
    if (!sink.write(`${text}\n`)) await once(sink, 'drain');
  }
  sink.end();
  await once(sink, 'finish');
  renameSync(tmp, out);
}

async function runMap(input, output, serve, extra = [], bin = BIN) {
  const started = process.hrtime.bigint();
  const env = childEnv(WORK, { UID2_API_KEY: serve.api_key, UID2_CLIENT_SECRET: serve.client_secret });
  const child = spawn(
    process.execPath,
    ['--import', REPORT, bin, 'map', input, '-o', output, '--base-url', serve.url, '--quiet', ...extra],
    { env, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const [code] = await once(child, 'close');
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  if (code !== 0 && code !== 3) throw new Error(`map exited with ${code}: ${stderr.slice(-1000)}`);
  const m = /BENCH_HWM_KB (\d+) CPU_US (\d+)/.exec(stderr);
  rmSync(output, { force: true });
  return { seconds, peakMb: m ? Number(m[1]) / 1024 : NaN, cpuS: m ? Number(m[2]) / 1e6 : NaN };
}

const files = await inputs();
const keyed = [
  ['plain', 'csv -> csv', files.csv, join(WORK, 'formats-out.csv')],
  ['gz', 'csv.gz -> csv.gz', files.gz, join(WORK, 'formats-out.csv.gz')],
  ['parquet-csv', 'parquet -> csv', files.parquet, join(WORK, 'formats-out-pq.csv')],
  ['parquet', 'parquet -> parquet', files.parquet, join(WORK, 'formats-out.parquet')],
  ['national', 'national, region US', files.national, join(WORK, 'formats-out-national.csv'), ['--phone-region', 'US']],
];
const cases = keyed.filter(([key]) => key === 'plain' || ONLY === undefined || ONLY.has(key)).map(([, ...c]) => c);
for (const [bin, label] of BEFORE === undefined
  ? [[BIN, '']]
  : [
      [BIN, ''],
      [BEFORE, ' (before)'],
    ])
  for (const [k, extra] of EXTRA_ARGS.entries()) {
    const tag = `${extra.join(' ')}${label}`;
    const out = `args${k}${label === '' ? '' : '-before'}`;
    cases.push(
      [`csv -> csv ${tag}`, files.csv, join(WORK, `formats-out-${out}.csv`), extra, bin],
      [
        `national ${tag}`,
        files.national,
        join(WORK, `formats-out-national-${out}.csv`),
        ['--phone-region', 'US', ...extra],
        bin,
      ],
    );
  }
if (BEFORE !== undefined && (ONLY === undefined || ONLY.has('parquet-csv') || ONLY.has('parquet')))
  cases.push(
    ['parquet -> csv (before)', files.parquet, join(WORK, 'formats-out-pq-before.csv'), [], BEFORE],
    ['parquet -> parquet (before)', files.parquet, join(WORK, 'formats-out-before.parquet'), [], BEFORE],
  );
const serve = await startServe(WORK);
const results = cases.map(() => []);
try {
  await runMap(files.csv, cases[0][2], serve); // warm the service up, unmeasured
  for (let r = 0; r < RUNS; r++)
    for (let k = 0; k < cases.length; k++)
      results[k].push(await runMap(cases[k][1], cases[k][2], serve, cases[k][3], cases[k][4]));
} finally {
  await stopServe(serve);
}
const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const base = median(results[0].map((x) => x.seconds));
/** The median of the ratios to the plain run of the same round: steadier than a ratio of medians when the load of the machine drifts between rounds. */
const paired = (k) => median(results[k].map((x, r) => results[0][r].seconds / x.seconds));
console.log(`map ${ROWS.toLocaleString('en-US')} mixed rows, median of ${RUNS} interleaved runs (default --threads)`);
cases.forEach(([name], k) => {
  const s = median(results[k].map((x) => x.seconds));
  const peak = Math.max(...results[k].map((x) => x.peakMb));
  const cpu = median(results[k].map((x) => x.cpuS));
  console.log(
    `  ${name.padEnd(34)} ${s.toFixed(2).padStart(7)} s  ${Math.round(ROWS / s)
      .toLocaleString('en-US')
      .padStart(
        9,
      )} rows/s  ${(base / s).toFixed(2)}x (paired ${paired(k).toFixed(2)}x)  peak ${peak.toFixed(0)} MB  cpu ${cpu.toFixed(1)} s  runs ${results[k].map((x) => x.seconds.toFixed(1)).join('/')}`,
  );
});

// for npm run bench, which shows these cases in its own table
const figures = cases.map(([name], k) => {
  const s = median(results[k].map((x) => x.seconds));
  return {
    name,
    seconds: Number(s.toFixed(2)),
    rows_per_s: Math.round(ROWS / s),
    vs_plain_csv: Number((base / s).toFixed(2)),
    vs_plain_csv_paired: Number(paired(k).toFixed(2)),
    peak_rss_mb: Math.round(Math.max(...results[k].map((x) => x.peakMb))),
    cli_cpu_s: Number(median(results[k].map((x) => x.cpuS)).toFixed(1)),
    runs_s: results[k].map((x) => Number(x.seconds.toFixed(1))),
  };
});
writeFileSync(
  join(ROOT, 'bench', 'results-formats.json'),
  `${JSON.stringify({ rows: ROWS, runs: RUNS, figures }, null, 2)}\n`,
);
