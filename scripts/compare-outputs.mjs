#!/usr/bin/env node
// Runs one matrix of commands with this tree's build and with another git ref's build, and compares what they
// write byte for byte: a refactor that changes an output's bytes is a bug, and this is how it is found.
//
//   npm run compare:outputs                       # against the merge-base with main
//   npm run compare:outputs -- --base REF         # against any commit, branch or tag
//   npm run compare:outputs -- --fast             # the small inputs and the cheaper cases only
//   npm run compare:outputs -- --only map-csv,remap
//   npm run compare:outputs -- --parquet cells    # Parquet outputs: the cells read back, not the file's bytes
//   npm run compare:outputs -- --rows 20000       # the generated input's size (default 100,000)
//   npm run compare:outputs -- --keep DIR         # leave both sides' outputs in DIR (DIR/base, DIR/head)
//   node scripts/compare-outputs.mjs --compare DIR  # compare what --keep left (and nothing else)
//   npm run compare:outputs -- --base-node-modules /path/to/node_modules   # when REF's dependencies differ
//
// The base is built in a temporary git worktree (its node_modules a link to this tree's, or to the given one),
// removed at the end; this tree's dist/ is used as it is (`npm run compare:outputs` builds it first). Each case
// runs the base build and then this one in folders of the same shape, with relative paths, so the two runs see
// the same arguments, with an empty HOME (no profile of the user's). Besides the outputs, each step's exit code,
// stdout, stderr and --summary-json are compared, and a step that exits with another code than the case expects
// is reported as UNEXPECTED (a matrix that fails the same way on both sides proves nothing). It prints one line
// per file (`same` or `DIFFERENT` with the first differing byte) and exits 0 when all are the same, 1 on any
// difference, 2 when it could not run.
//
// What legitimately differs from run to run is pinned or normalized, and nothing else:
// - `serve` cases pin the service's identity time (POST /_local/clock) and remap-due's own clock (`--now`), and
//   give opt-outs a fixed `since_ms`; `--env local` cases run on the real clock, which moves raw UIDs and refresh
//   times only at a UTC midnight: a comparison that spans one is refused (exit 2: run it again).
// - `--summary-json`: the values of `duration_s`, of keys ending in `_per_s` or `_ms`, and of `at`/`_at` keys
//   (times of the run) become "<normalized>".
// - stderr: the plain progress lines (written every 10 s, so their number depends on speed) are dropped, and
//   durations ("in 1.2 s") and rates ("4,800 rows/s") become <t> and <rate>.
// - a first `map --state` over repeated identifiers across several batches: whether a repeat is answered by the
//   request in flight or by the file depends on which answer came first, so its `from_state` and `deduplicated`
//   (summary and stderr) are normalized; the second run's are not.
// - `state export` after several batches: entries are stored in the order their batches were answered, so its
//   lines are compared sorted (the header first).
// - state files are not compared (their bytes hold times and page layouts); `state export` of them is.
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { rowGenerator, seededRandom } from '../bench/gen-input.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const USAGE =
  'usage: node scripts/compare-outputs.mjs [--base REF] [--fast] [--only CASES] [--rows N] [--parquet bytes|cells] [--keep DIR] [--base-node-modules DIR] | --compare DIR [--parquet bytes|cells]';

/** A usage or set-up failure: one line, exit 2. */
class SetupError extends Error {}

// --- options -------------------------------------------------------------------------------------------------------

function parseArgs(argv) {
  const options = { fast: false, parquet: 'bytes', rows: 100_000 };
  const argAfter = (i) => {
    if (i + 1 >= argv.length) throw new SetupError(`${argv[i]} needs a value\n${USAGE}`);
    return argv[i + 1];
  };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    if (flag === '--fast') options.fast = true;
    else if (flag === '--base') options.base = argAfter(i++);
    else if (flag === '--only') options.only = argAfter(i++).split(',');
    else if (flag === '--rows') options.rows = Number(argAfter(i++));
    else if (flag === '--parquet') options.parquet = argAfter(i++);
    else if (flag === '--keep') options.keep = resolve(argAfter(i++));
    else if (flag === '--compare') options.compare = resolve(argAfter(i++));
    else if (flag === '--base-node-modules') options.baseNodeModules = resolve(argAfter(i++));
    else if (flag === '--help' || flag === '-h') {
      console.log(USAGE);
      process.exit(0);
    } else throw new SetupError(`unknown option ${flag}\n${USAGE}`);
  }
  if (!['bytes', 'cells'].includes(options.parquet)) throw new SetupError('--parquet must be bytes or cells');
  if (!Number.isInteger(options.rows) || options.rows < 1000) throw new SetupError('--rows must be at least 1000');
  return options;
}

// --- git and builds ------------------------------------------------------------------------------------------------

function git(args, cwd = ROOT) {
  const run = spawnSync('git', args, { cwd, encoding: 'utf8' });
  if (run.status !== 0) throw new SetupError(`git ${args.join(' ')}: ${run.stderr.trim()}`);
  return run.stdout.trim();
}

/** The merge-base with main (or HEAD when there is no main): the build before this branch's changes. */
function defaultBase() {
  const main = spawnSync('git', ['rev-parse', '--verify', '--quiet', 'main'], { cwd: ROOT, encoding: 'utf8' });
  return main.status === 0 ? git(['merge-base', 'HEAD', 'main']) : 'HEAD';
}

/** Checks `ref` out in a temporary worktree and builds it there; returns the worktree's path. */
function buildBase(ref, nodeModules, onWorktree) {
  const commit = git(['rev-parse', '--verify', `${ref}^{commit}`]);
  const tree = mkdtempSync(join(tmpdir(), 'uid2-batch-compare-base-'));
  onWorktree(tree);
  git(['worktree', 'add', '--detach', '--quiet', tree, commit]);
  const same = (file) => readFileSync(join(ROOT, file), 'utf8') === readFileSync(join(tree, file), 'utf8');
  if (nodeModules === undefined && !same('package-lock.json'))
    process.stderr.write(
      `compare-outputs: ${ref}'s package-lock.json differs from this tree's; if its build fails, give its dependencies with --base-node-modules DIR\n`,
    );
  symlinkSync(nodeModules ?? join(ROOT, 'node_modules'), join(tree, 'node_modules'), 'dir');
  process.stderr.write(`compare-outputs: building ${ref} (${commit.slice(0, 12)}) in ${tree}\n`);
  const tsc = spawnSync(
    process.execPath,
    [join(tree, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'],
    {
      cwd: tree,
      encoding: 'utf8',
    },
  );
  // type errors still emit JavaScript; what matters is that the CLI is there
  if (!existsSync(join(tree, 'dist', 'cli', 'main.js')))
    throw new SetupError(`the build of ${ref} failed: ${(tsc.stdout + tsc.stderr).trim().slice(0, 2000)}`);
  return commit;
}

function removeWorktree(tree) {
  spawnSync('git', ['worktree', 'remove', '--force', tree], { cwd: ROOT });
  rmSync(tree, { recursive: true, force: true });
}

// --- inputs --------------------------------------------------------------------------------------------------------

const NOTES = ['', '', '', 'Smith, J.', 'said "call me"', 'two\nlines', 'VIP; "gold", since 2019', '  padded  '];
const csvCell = (v) => (/[",\n\r]/.test(v) ? `"${v.replace(/"/g, '""')}"` : v);

/**
 * The generated mixed input: bench's seeded rows plus a note column of quoted cells (commas, quotes, line breaks
 * inside quotes), and a few records that cannot be read (a NUL, invalid UTF-8, a quote never closed) for
 * `--on-bad-row skip`. The same rows as JSON Lines (without the bad records), and split into three parts.
 */
function writeInputs(dir, rows) {
  const next = rowGenerator(7);
  const random = seededRandom(11);
  const header = 'id,email,phone,email_hash,signup_date,note';
  const lines = [];
  const jsonl = [];
  for (let i = 1; i <= rows; i++) {
    const r = next();
    const note = NOTES[Math.floor(random() * NOTES.length)];
    const id = `R${String(i).padStart(7, '0')}`;
    lines.push([id, csvCell(r.email), csvCell(r.phone), r.emailHash, r.signupDate, csvCell(note)].join(','));
    jsonl.push(
      JSON.stringify({ id, email: r.email, phone: r.phone, email_hash: r.emailHash, signup_date: r.signupDate, note }),
    );
  }
  const csv = [];
  const bad = [
    Buffer.from('BAD0001,nul\u0000@example.com,,,2020-01-01,\n'),
    Buffer.concat([Buffer.from('BAD0002,'), Buffer.from([0xff, 0xfe]), Buffer.from('@example.com,,,2020-01-01,\n')]),
    Buffer.from('BAD0003,"never closed@example.com,,,2020-01-01,\n'),
  ];
  const every = Math.floor(rows / (bad.length + 1));
  csv.push(Buffer.from(`${header}\n`));
  for (let i = 0; i < lines.length; i++) {
    csv.push(Buffer.from(`${lines[i]}\n`));
    if ((i + 1) % every === 0 && (i + 1) / every <= bad.length) csv.push(bad[(i + 1) / every - 1]);
  }
  writeFileSync(join(dir, 'mixed.csv'), Buffer.concat(csv));
  writeFileSync(join(dir, 'mixed.jsonl'), `${jsonl.join('\n')}\n`);
  mkdirSync(join(dir, 'parts'));
  const third = Math.ceil(lines.length / 3);
  for (let p = 0; p < 3; p++)
    writeFileSync(
      join(dir, 'parts', `part-${p + 1}.csv`),
      `${header}\n${lines.slice(p * third, (p + 1) * third).join('\n')}\n`,
    );
}

// --- cases ---------------------------------------------------------------------------------------------------------

/** The service's identity time in `serve` cases, and remap-due's --now after 30 simulated days. */
const PINNED_MS = Date.parse('2026-01-01T06:00:00Z');
const REMAP_NOW_S = PINNED_MS / 1000 + 30 * 86_400;
const SAMPLE = '../../inputs/customers.csv';
const MIXED = '../../inputs/mixed.csv';

/**
 * Each case is a folder of steps run with one build. A step is `{ args }` (the CLI's arguments; in a `serve` case,
 * UID2_BASE_URL and the credentials name that `serve`; `racy`: its from-state counts are normalized; `unordered`:
 * that output's lines are sorted), `{ mkdir }`, or `{ admin: [path, body] }` (a request to the case's `serve`'s
 * /_local endpoints). `fast`:
 * also in the --fast subset. Every file a case leaves is compared, but for the state file itself.
 */
const CASES = [
  {
    name: 'map-csv',
    fast: true,
    steps: [{ args: ['map', SAMPLE, '--env', 'local', '-o', 'out.csv', '--rejects', 'rejects.csv'] }],
  },
  { name: 'map-tsv', fast: true, steps: [{ args: ['map', SAMPLE, '--env', 'local', '-o', 'out.tsv'] }] },
  {
    name: 'map-mixed-bad-rows',
    steps: [
      {
        args: [
          'map',
          MIXED,
          '--env',
          'local',
          '-o',
          'out.csv',
          '--on-bad-row',
          'skip',
          '--bad-rows',
          'bad-rows.csv',
          '--rejects',
          'rejects.csv',
        ],
      },
    ],
  },
  {
    name: 'map-mixed-threads-0',
    steps: [
      {
        args: ['map', MIXED, '--env', 'local', '-o', 'out.csv', '--on-bad-row', 'skip', '--threads', '0'],
      },
    ],
  },
  {
    name: 'map-gzip',
    steps: [{ args: ['map', MIXED, '--env', 'local', '-o', 'out.csv.gz', '--on-bad-row', 'skip'] }],
  },
  {
    name: 'map-jsonl',
    fast: true,
    steps: [
      {
        args: ['map', SAMPLE, '--env', 'local', '-o', 'out.jsonl', '--emit-hash', '--time-format', 'iso'],
      },
    ],
  },
  {
    name: 'map-jsonl-in',
    steps: [{ args: ['map', '../../inputs/mixed.jsonl', '--env', 'local', '-o', 'out.jsonl.gz'] }],
  },
  {
    name: 'map-parquet',
    fast: true,
    steps: [
      { args: ['map', SAMPLE, '--env', 'local', '-o', 'out.parquet'] },
      { args: ['map', SAMPLE, '--env', 'local', '-o', 'out-iso.parquet', '--time-format', 'iso', '--emit-hash'] },
      {
        args: [
          'map',
          '../../inputs/customers.parquet',
          '--env',
          'local',
          '-o',
          'from-parquet.csv',
          '--email-col',
          'email',
          '--phone-col',
          'phone',
        ],
      },
      {
        args: [
          'map',
          '../../inputs/customers.parquet',
          '--env',
          'local',
          '-o',
          'parquet-to.parquet',
          '--email-col',
          'email',
          '--phone-col',
          'phone',
        ],
      },
    ],
  },
  {
    name: 'map-output-dir',
    steps: [
      { mkdir: 'parts-out' },
      { args: ['map', '../../inputs/parts', '--env', 'local', '--output-dir', 'parts-out'] },
    ],
  },
  {
    name: 'map-phone-region',
    fast: true,
    steps: [{ args: ['map', SAMPLE, '--env', 'local', '-o', 'out.csv', '--phone-region', 'US', '--keep', 'id,phone'] }],
  },
  { name: 'map-v2', steps: [{ args: ['map', SAMPLE, '--env', 'local', '--api', 'v2', '-o', 'out.csv'] }] },
  {
    name: 'map-dry-run',
    fast: true,
    steps: [{ args: ['map', MIXED, '--env', 'local', '--dry-run', '--on-bad-row', 'skip'] }],
  },
  {
    name: 'hash',
    fast: true,
    steps: [
      { args: ['hash', SAMPLE, '-o', 'out.csv'] },
      { args: ['hash', MIXED, '-o', 'mixed.csv', '--on-bad-row', 'skip', '--hash-encoding', 'hex'] },
    ],
  },
  {
    name: 'map-state',
    fast: true,
    steps: [
      { args: ['map', SAMPLE, '--env', 'local', '--state', 'state.db', '-o', 'first.csv'] },
      { args: ['map', SAMPLE, '--env', 'local', '--state', 'state.db', '-o', 'second.csv'] },
      { args: ['state', 'export', 'state.db', '-o', 'export.csv'] },
    ],
  },
  {
    name: 'map-state-mixed',
    steps: [
      {
        args: ['map', MIXED, '--env', 'local', '--state', 'state.db', '-o', 'first.csv', '--on-bad-row', 'skip'],
        racy: true,
      },
      { args: ['map', MIXED, '--env', 'local', '--state', 'state.db', '-o', 'second.csv', '--on-bad-row', 'skip'] },
      { args: ['state', 'export', 'state.db', '--format', 'jsonl', '-o', 'export.jsonl'], unordered: 'export.jsonl' },
    ],
  },
  {
    name: 'remap',
    fast: true,
    serve: true,
    steps: [
      { args: ['map', SAMPLE, '--state', 'state.db', '-o', 'mapped.csv', '--emit-hash'] },
      ...['lmartinez9987@example.net', 'mary_muller823@example.net'].map((email) => ({
        admin: ['/_local/optout', { email, since_ms: PINNED_MS + 86_400_000 }],
      })),
      {
        admin: ['/_local/optout', { email: 'Fatima.Muller2478+shop@gmail.Com', since_ms: PINNED_MS + 2 * 86_400_000 }],
      },
      { admin: ['/_local/clock', { advance_days: 30 }] },
      { args: ['remap-due', '--state', 'state.db', '--now', String(REMAP_NOW_S), '--dry-run'] },
      { args: ['remap-due', '--state', 'state.db', '--now', String(REMAP_NOW_S), '-o', 'changes.csv'] },
      {
        args: ['optout-check', 'mapped.csv', '--col', 'email_raw_uid', '--col', 'phone_raw_uid', '-o', 'verdicts.csv'],
      },
      { args: ['optout-check', '--state', 'state.db', '-o', 'sweep.jsonl'] },
      { args: ['state', 'export', 'state.db', '-o', 'export.csv'] },
      { args: ['optout-check', '../../inputs/raw-uids.csv', '-o', 'raw-uids.csv', '--time-format', 'iso'] },
    ],
  },
];

/** The mixed input holds records that cannot be read: a run that skips them ends with 9, any other with 0. */
const expectedExit = (step) => (step.args.some((a) => a.startsWith(MIXED)) && step.args.includes('skip') ? 9 : 0);

// --- normalization -------------------------------------------------------------------------------------------------

const NORMALIZED = '<normalized>';
const isTimeKey = (key) => key === 'duration_s' || key === 'at' || /(_per_s|_ms|_at)$/.test(key);
const RACY_KEYS = ['from_state', 'deduplicated'];

function normalizeJson(value, racy) {
  if (Array.isArray(value)) return value.map((v) => normalizeJson(v, racy));
  if (value === null || typeof value !== 'object') return value;
  const normalized = (k) => isTimeKey(k) || (racy && RACY_KEYS.includes(k));
  return Object.fromEntries(
    Object.entries(value).map(([k, v]) => [k, normalized(k) && v !== null ? NORMALIZED : normalizeJson(v, racy)]),
  );
}

const PROGRESS_LINE = /^[\w -]+: [\d,]+(\/~?[\d,]+)? [\w ]+?( \([\d.]+%\))?, [\d,.]+[kM]? [\w ]+\/s(, ETA [^,]+)?, /;

function normalizeStderr(text, racy) {
  return text
    .split('\n')
    .filter((line) => !PROGRESS_LINE.test(line))
    .map((line) => {
      const out = line
        .replace(/\b\d[\d,]*(\.\d+)? ?(ms|s|min)\b/g, '<t> $2')
        .replace(/\b\d[\d,]*(\.\d+)?[kM]?( [\w ]+?)?\/s\b/g, '<rate>$2/s');
      return racy ? out.replace(/\b[\d,]+ from state\b/g, '<normalized> from state') : out;
    })
    .join('\n');
}

/** The file's lines sorted, a CSV's header kept first: for outputs in the order entries were stored. */
function sortLines(path) {
  const lines = readFileSync(path, 'utf8').split('\n');
  const last = lines.pop();
  const head = /\.(csv|tsv)$/.test(path) ? lines.splice(0, 1) : [];
  writeFileSync(path, [...head, ...lines.sort(), last].join('\n'));
}

// --- running -------------------------------------------------------------------------------------------------------

async function startServe(bin, cwd) {
  const child = spawn(process.execPath, [bin, 'serve', '--port', '0'], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stderr.on('data', (d) => (err += d));
  const line = await new Promise((resolve_, reject) => {
    child.stdout.on('data', (d) => {
      out += d;
      const nl = out.indexOf('\n');
      if (nl >= 0) resolve_(out.slice(0, nl));
    });
    child.once('exit', (code) => reject(new SetupError(`serve exited with ${code} before it was ready: ${err}`)));
  });
  const ready = JSON.parse(line);
  return { child, url: ready.url, apiKey: ready.api_key, clientSecret: ready.client_secret };
}

async function stopServe(serve) {
  if (serve.child.exitCode !== null || serve.child.signalCode !== null) return;
  serve.child.kill('SIGTERM');
  await once(serve.child, 'exit');
}

async function admin(serve, path, body) {
  const res = await fetch(`${serve.url}${path}`, {
    method: 'POST',
    body: JSON.stringify(body),
    headers: { 'content-type': 'application/json' },
  });
  if (res.status !== 200) throw new SetupError(`${path}: HTTP ${res.status} ${await res.text()}`);
}

async function runCli(bin, args, cwd, env) {
  const child = spawn(process.execPath, [bin, ...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const stdout = [];
  let stderr = '';
  child.stdout.on('data', (d) => stdout.push(d));
  child.stderr.on('data', (d) => (stderr += d));
  const [code, signal] = await once(child, 'close');
  return { code: code ?? signal, stdout: Buffer.concat(stdout), stderr };
}

/**
 * Runs one case with one build in `dir`. Each CLI step leaves `N.exit` (its exit code), `N.stdout`, `N.stderr`
 * and `N.summary.json` (normalized as above) beside its outputs.
 */
async function runCase(kase, bin, dir, home, unexpected) {
  mkdirSync(dir, { recursive: true });
  const env = { ...process.env, NO_COLOR: '1' };
  for (const name of ['UID2_API_KEY', 'UID2_CLIENT_SECRET', 'UID2_ENV', 'UID2_BASE_URL', 'UID2_PROFILE'])
    delete env[name];
  // no profile of the user's own: an empty home, the same path for both builds
  env.HOME = home;
  const serve = kase.serve ? await startServe(bin, dir) : undefined;
  try {
    if (serve) {
      await admin(serve, '/_local/clock', { set: PINNED_MS });
      env.UID2_BASE_URL = serve.url;
      env.UID2_API_KEY = serve.apiKey;
      env.UID2_CLIENT_SECRET = serve.clientSecret;
    }
    let n = 0;
    for (const step of kase.steps) {
      if (step.admin) {
        await admin(serve, ...step.admin);
        continue;
      }
      if (step.mkdir) {
        mkdirSync(join(dir, step.mkdir));
        continue;
      }
      n++;
      const run = await runCli(bin, [...step.args, '--summary-json', `${n}.summary.raw.json`], dir, env);
      writeFileSync(join(dir, `${n}.exit`), `${run.code}\n`);
      if (run.code !== expectedExit(step))
        unexpected.push(
          `${relative(dirname(dirname(dir)), dir)} step ${n}: exit ${run.code}: ${run.stderr.trim().split('\n').pop()}`,
        );
      writeFileSync(join(dir, `${n}.stdout`), run.stdout);
      writeFileSync(join(dir, `${n}.stderr`), normalizeStderr(run.stderr, step.racy));
      if (step.unordered && existsSync(join(dir, step.unordered))) sortLines(join(dir, step.unordered));
      const raw = join(dir, `${n}.summary.raw.json`);
      if (existsSync(raw)) {
        const summary = normalizeJson(JSON.parse(readFileSync(raw, 'utf8')), step.racy);
        writeFileSync(join(dir, `${n}.summary.json`), `${JSON.stringify(summary, null, 2)}\n`);
        rmSync(raw);
      }
    }
  } finally {
    if (serve) await stopServe(serve);
  }
}

// --- comparing -----------------------------------------------------------------------------------------------------

const STATE_FILE = /\.db(-wal|-shm|-journal)?$|\.lock$/;

function filesUnder(dir, prefix = '') {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    if (e.isDirectory()) return filesUnder(join(dir, e.name), `${prefix}${e.name}/`);
    return STATE_FILE.test(e.name) ? [] : [`${prefix}${e.name}`];
  });
}

function firstDifference(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : n;
}

/**
 * The cells of a Parquet file as JSON text: its columns (name and type) and its rows. Read by DuckDB (a reader
 * apart from the tool's own Parquet libraries), or by hyparquet where DuckDB is not installed.
 */
async function parquetCells(path) {
  const duckdb = await import('@duckdb/node-api').catch(() => undefined);
  if (duckdb !== undefined) {
    const instance = await duckdb.DuckDBInstance.create(':memory:');
    const connection = await instance.connect();
    try {
      const reader = await connection.runAndReadAll(`SELECT * FROM read_parquet('${path.replace(/'/g, "''")}')`);
      const columns = reader.columnNames().map((name, i) => [name, String(reader.columnTypes()[i])]);
      return Buffer.from(JSON.stringify({ columns, rows: reader.getRowsJson() }));
    } finally {
      connection.closeSync();
      instance.closeSync();
    }
  }
  const hyparquet = await import('hyparquet').catch(() => undefined);
  if (hyparquet === undefined)
    throw new SetupError('--parquet cells reads Parquet with @duckdb/node-api or hyparquet: neither is installed');
  const file = await hyparquet.asyncBufferFromFile(path);
  const metadata = await hyparquet.parquetMetadataAsync(file);
  const columns = metadata.schema
    .slice(1)
    .map((c) => [c.name, c.type, c.logical_type?.type ?? c.converted_type ?? null]);
  const rows = await hyparquet.parquetReadObjects({ file });
  return Buffer.from(JSON.stringify({ columns, rows }, (_, v) => (typeof v === 'bigint' ? `${v}n` : v)));
}

const fmt = (n) => n.toLocaleString('en-US');

/** Compares every file under base/ and head/; one line each; true when all are the same. */
export async function compareTrees(baseDir, headDir, { parquet = 'bytes', write = (line) => console.log(line) } = {}) {
  const names = [...new Set([...filesUnder(baseDir), ...filesUnder(headDir)])].sort();
  let allSame = names.length > 0;
  for (const name of names) {
    const [a, b] = [join(baseDir, name), join(headDir, name)];
    if (!existsSync(a) || !existsSync(b)) {
      allSame = false;
      write(`DIFFERENT  ${name}: only in ${existsSync(a) ? 'base' : 'head'}`);
      continue;
    }
    const cells = parquet === 'cells' && name.endsWith('.parquet');
    const [x, y] = cells ? [await parquetCells(a), await parquetCells(b)] : [readFileSync(a), readFileSync(b)];
    const at = firstDifference(x, y);
    const what = cells ? 'bytes of cells as JSON' : 'bytes';
    if (at === -1) {
      write(`same       ${name} (${fmt(x.length)} ${what})`);
      continue;
    }
    allSame = false;
    let note = '';
    if (name.endsWith('.gz') && !cells) {
      try {
        note = firstDifference(gunzipSync(x), gunzipSync(y)) === -1 ? '; gunzipped: the same' : '; gunzipped: differ';
      } catch {}
    }
    write(
      `DIFFERENT  ${name}: first differing byte at offset ${fmt(at)} (base ${fmt(x.length)}, head ${fmt(y.length)} ${what}${note})`,
    );
  }
  if (names.length === 0) write('DIFFERENT  nothing to compare: no outputs found');
  return allSame;
}

// --- main ----------------------------------------------------------------------------------------------------------

async function main() {
  const options = parseArgs(process.argv.slice(2));
  if (options.compare !== undefined) {
    const same = await compareTrees(join(options.compare, 'base'), join(options.compare, 'head'), options);
    return same ? 0 : 1;
  }
  const headBin = join(ROOT, 'bin', 'uid2-batch.js');
  if (!existsSync(join(ROOT, 'dist', 'cli', 'main.js')))
    throw new SetupError('dist/ is missing: run `npm run build` first (npm run compare:outputs does)');
  const cases = CASES.filter((c) => (options.only ? options.only.includes(c.name) : !options.fast || c.fast));
  const unknown = (options.only ?? []).filter((name) => !CASES.some((c) => c.name === name));
  if (unknown.length > 0)
    throw new SetupError(`unknown case ${unknown[0]}; the cases: ${CASES.map((c) => c.name).join(', ')}`);

  const work = options.keep ?? mkdtempSync(join(tmpdir(), 'uid2-batch-compare-'));
  if (options.keep !== undefined) {
    if (existsSync(work) && readdirSync(work).length > 0) throw new SetupError(`--keep ${work}: not an empty folder`);
    mkdirSync(work, { recursive: true });
  }
  const base = options.base ?? defaultBase();
  let baseTree;
  const cleanUp = () => {
    if (baseTree) removeWorktree(baseTree);
    baseTree = undefined;
    if (options.keep === undefined) rmSync(work, { recursive: true, force: true });
  };
  const onSignal = (signal) => {
    cleanUp();
    process.exit(signal === 'SIGINT' ? 130 : 143);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    buildBase(base, options.baseNodeModules, (tree) => {
      baseTree = tree;
    });
    const inputs = join(work, 'inputs');
    mkdirSync(inputs);
    for (const sample of ['customers.csv', 'raw-uids.csv'])
      writeFileSync(join(inputs, sample), readFileSync(join(ROOT, 'samples', sample)));
    if (cases.some((c) => JSON.stringify(c.steps).includes('mixed')))
      writeInputs(inputs, options.fast ? 5_000 : options.rows);
    if (cases.some((c) => JSON.stringify(c.steps).includes('customers.parquet'))) {
      // one Parquet input for both sides, written by this tree's build
      const made = await runCli(
        headBin,
        ['hash', 'customers.csv', '--keep', 'id,email,phone,signup_date', '-o', 'customers.parquet', '--quiet'],
        inputs,
        process.env,
      );
      if (made.code !== 0) throw new SetupError(`writing the Parquet input failed: ${made.stderr.trim()}`);
    }
    const home = join(work, 'home');
    mkdirSync(home);
    const unexpected = [];
    const day = () => Math.floor(Date.now() / 86_400_000);
    const firstDay = day();
    process.stderr.write(
      `compare-outputs: ${cases.length} cases, base ${base} against this tree; normalized: times, rates and progress lines; first --state runs' from-state counts; the order of multi-batch exports\n`,
    );
    for (const kase of cases) {
      process.stderr.write(`  ${kase.name}...\n`);
      await runCase(kase, join(baseTree, 'bin', 'uid2-batch.js'), join(work, 'base', kase.name), home, unexpected);
      await runCase(kase, headBin, join(work, 'head', kase.name), home, unexpected);
    }
    if (day() !== firstDay)
      throw new SetupError('a UTC midnight passed during the comparison (it moves --env local raw UIDs): run it again');
    const same = (await compareTrees(join(work, 'base'), join(work, 'head'), options)) && unexpected.length === 0;
    for (const line of unexpected) console.log(`UNEXPECTED ${line}`);
    console.log(same ? `all the same: ${base} and this tree` : `DIFFERENT: ${base} and this tree`);
    return same ? 0 : 1;
  } finally {
    cleanUp();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().then(
    (code) => {
      process.exitCode = code;
    },
    (err) => {
      process.stderr.write(`compare-outputs: ${err instanceof SetupError ? err.message : err.stack}\n`);
      process.exitCode = 2;
    },
  );
}
