#!/usr/bin/env node
// Benchmark of `uid2-batch map` end to end: generated CSV -> built CLI -> `uid2-batch serve` in another process.
// Prints rows/s and the CLI's peak RSS for each size. Not a test: numbers depend on the machine.
//
//   npm run bench:map                 # 1,000,000 and 3,000,000 rows
//   node bench/map.mjs 200000 1000000 # other sizes (run `npm run build` first)
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createWriteStream, existsSync, mkdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const BIN = join(ROOT, 'bin', 'uid2-batch.js');
const WORK = join(tmpdir(), 'uid2-batch-bench');
const sizes = process.argv.slice(2).map(Number).filter((n) => Number.isInteger(n) && n > 0);
const SIZES = sizes.length > 0 ? sizes : [1_000_000, 3_000_000];

if (!existsSync(join(ROOT, 'dist', 'cli', 'main.js'))) {
  console.error('bench/map.mjs: dist/ is missing; run `npm run build` first');
  process.exit(2);
}
mkdirSync(WORK, { recursive: true });

// --- input: seeded, so every run maps the same rows ------------------------------------------------------------
function seeded(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const FIRST = ['james', 'mary', 'John', 'patricia', 'Robert', 'jennifer', 'michael', 'Linda', 'william', 'elizabeth', 'david', 'barbara'];
const LAST = ['smith', 'Johnson', 'williams', 'brown', 'jones', 'Garcia', 'miller', 'davis', 'rodriguez', 'martinez'];
const DOMAINS = ['gmail.com', 'Gmail.com', 'yahoo.com', 'outlook.com', 'example.org', 'hotmail.com', 'icloud.com', 'corp.example.com'];

/** Emails with mixed case, gmail dots and +tags, some padding, about 1% invalid and 2% repeats. */
async function generate(rows, path) {
  const random = seeded(rows);
  const pick = (list) => list[Math.floor(random() * list.length)];
  const out = createWriteStream(path);
  out.write('id,email,segment\n');
  let buf = '';
  for (let i = 0; i < rows; i++) {
    let email;
    const roll = random();
    if (roll < 0.01) email = `not-an-email-${i}`;
    else if (roll < 0.03) email = `repeat${i % 1000}@example.com`;
    else {
      const domain = pick(DOMAINS);
      const local = `${pick(FIRST)}${random() < 0.5 ? '.' : ''}${pick(LAST)}${i}`;
      const tag = domain.toLowerCase() === 'gmail.com' && random() < 0.3 ? '+news' : '';
      email = `${random() < 0.05 ? ' ' : ''}${local}${tag}@${domain}`;
    }
    buf += `${i},${email},s${i % 7}\n`;
    if (buf.length > 1 << 20) {
      if (!out.write(buf)) await once(out, 'drain');
      buf = '';
    }
  }
  out.write(buf);
  out.end();
  await once(out, 'finish');
}

/** The shared seeded generator (bench/gen-input.mjs, id,email) when it is there; else the one above. */
const GEN_INPUT = join(ROOT, 'bench', 'gen-input.mjs');
async function generateInput(rows, path) {
  if (!existsSync(GEN_INPUT)) return generate(rows, path);
  const { writeRows } = await import(pathToFileURL(GEN_INPUT).href);
  await writeRows({ rows, seed: 42, out: path, kind: 'email' });
}

// --- processes -------------------------------------------------------------------------------------------------
const childEnv = (extra = {}) => {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('UID2_')) env[k] = v;
  return { ...env, XDG_CONFIG_HOME: join(WORK, 'no-config'), NO_COLOR: '1', ...extra };
};

async function startServe() {
  const child = spawn(process.execPath, [BIN, 'serve', '--port', '0'], { env: childEnv(), stdio: ['ignore', 'pipe', 'inherit'] });
  let text = '';
  for await (const chunk of child.stdout) {
    text += chunk;
    if (text.includes('\n')) break;
  }
  const ready = JSON.parse(text.slice(0, text.indexOf('\n')));
  return { child, ...ready };
}

// The CLI reports its own peak RSS (getrusage ru_maxrss, which is the high-water mark) as it exits.
// Also its CPU time, which says more than the wall time when other work shares the machine.
const REPORT_RSS = `data:text/javascript,${encodeURIComponent(
  "import { writeSync } from 'node:fs'; process.on('exit', () => { const u = process.resourceUsage(); writeSync(2, `\\nPEAK_RSS_KB ${u.maxRSS} CPU_US ${u.userCPUTime + u.systemCPUTime}\\n`); });",
)}`;

/** CPU seconds a process has used so far (Linux /proc), for the service's share. */
function cpuSecondsOf(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return NaN;
  }
}

async function runMap(input, output, summary, serve) {
  const args = ['--import', REPORT_RSS, BIN, 'map', input, '-o', output, '--base-url', serve.url, '--quiet', '--summary-json', summary];
  const started = process.hrtime.bigint();
  const child = spawn(process.execPath, args, {
    env: childEnv({ UID2_API_KEY: serve.api_key, UID2_CLIENT_SECRET: serve.client_secret }),
    stdio: ['ignore', 'inherit', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const [code] = await once(child, 'close');
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const rss = /PEAK_RSS_KB (\d+) CPU_US (\d+)/.exec(stderr);
  if (code !== 0) throw new Error(`map exited with ${code}: ${stderr}`);
  return { seconds, peakRssMb: rss ? Number(rss[1]) / 1024 : NaN, cpuS: rss ? Number(rss[2]) / 1e6 : NaN };
}

const serve = await startServe();
const results = [];
try {
  for (const rows of SIZES) {
    const input = join(WORK, `${existsSync(GEN_INPUT) ? 'gen' : 'own'}-emails-${rows}.csv`);
    if (!existsSync(input)) {
      process.stderr.write(`generating ${rows.toLocaleString('en-US')} rows into ${input}...\n`);
      await generateInput(rows, input);
    }
    const output = join(WORK, `mapped-${rows}.csv`);
    const summaryPath = join(WORK, `summary-${rows}.json`);
    const serveCpuBefore = cpuSecondsOf(serve.child.pid);
    const { seconds, peakRssMb, cpuS } = await runMap(input, output, summaryPath, serve);
    const serveCpuS = cpuSecondsOf(serve.child.pid) - serveCpuBefore;
    const summary = JSON.parse(readFileSync(summaryPath, 'utf8'));
    if (summary.rows !== rows) throw new Error(`expected ${rows} rows in the summary, got ${summary.rows}`);
    const line = {
      rows,
      seconds: Number(seconds.toFixed(2)),
      rows_per_s: Math.round(rows / seconds),
      peak_rss_mb: Math.round(peakRssMb),
      cli_cpu_s: Number(cpuS.toFixed(2)),
      serve_cpu_s: Number(serveCpuS.toFixed(2)),
      load_avg: Number(loadavg()[0].toFixed(1)),
      requests: summary.requests,
      input_mb: Number((statSync(input).size / 1e6).toFixed(1)),
      output_mb: Number((statSync(output).size / 1e6).toFixed(1)),
    };
    results.push(line);
    console.log(
      `map ${rows.toLocaleString('en-US')} rows: ${line.seconds} s, ${line.rows_per_s.toLocaleString('en-US')} rows/s, ` +
        `peak RSS ${line.peak_rss_mb} MB; CPU ${line.cli_cpu_s} s map + ${line.serve_cpu_s} s serve ` +
        `(${line.requests} requests; ${line.input_mb} MB in, ${line.output_mb} MB out; load ${line.load_avg})`,
    );
    rmSync(output, { force: true });
  }
} finally {
  process.kill(serve.child.pid, 'SIGTERM');
  await once(serve.child, 'exit');
}
console.log(JSON.stringify({ node: process.version, results }));
