#!/usr/bin/env node
// Benchmark of the nightly `remap-due`: a state file of 5,000,000 entries of which 1/365 are due, built directly
// through the state module of dist/; then the selection of one day's due entries through its due lists, and
// the built CLI re-mapping them against `uid2-batch serve` in another process. Not a test: numbers depend on
// the machine.
//
//   npm run bench:remap                # 5,000,000 entries
//   node bench/remap.mjs 1000000       # another size (run `npm run build` first)
//   node bench/remap.mjs 5000000 --keep   # keep the state file for another look
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BIN, childEnv, ROOT, startServe } from './processes.mjs';

const WORK = join(tmpdir(), 'uid2-batch-bench-remap');
const args = process.argv.slice(2);
const ENTRIES = Number(args.find((a) => /^\d+$/.test(a)) ?? 5_000_000);
const KEEP = args.includes('--keep');
const DAY_S = 86_400;
// big sorted transactions: the UNIQUE (hash, type) index takes them in order instead of at random
const COMMIT_ROWS = 250_000;

if (!existsSync(join(ROOT, 'dist', 'state', 'index.js')) || !existsSync(join(ROOT, 'dist', 'cli', 'main.js'))) {
  console.error('bench/remap.mjs: dist/ is missing; run `npm run build` first');
  process.exit(2);
}
const { openState } = await import(join(ROOT, 'dist', 'state', 'index.js'));
// the SQLite driver that src/state uses on this Node (better-sqlite3 13 on 22+, the 12.x alias on 20)

mkdirSync(WORK, { recursive: true });
const statePath = join(WORK, `state-${ENTRIES}.db`);
for (const suffix of ['', '-wal', '-shm', '.lock']) rmSync(statePath + suffix, { force: true });

const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6;
const fmt = (n) => new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 }).format(n);
const sec = (m) => `${(m / 1000).toFixed(2)} s`;
const results = { entries: ENTRIES };

// --- serve in its own process, on the real clock ----------------------------------------------------------------
const served = await startServe(WORK);
try {
  // --- build: 5M email-hash entries, r spread over the coming year, day 0 (1/365) already due --------------------
  const nowS = Math.floor(Date.now() / 1000);
  const fingerprint = 'UID2:local';
  let t0 = process.hrtime.bigint();
  // a building-only page cache; the CLI runs below use the state's default
  const state = openState(statePath, { envFingerprint: fingerprint, cacheSizeMiB: 1024 });
  const hashOf = (i) => createHash('sha256').update(`bench-${i}`).digest('base64');
  // stored raw UIDs need only the shape of one: the remap replaces them
  const rawUidOf = (hash) => `${hash.slice(0, 40)}AAA=`;
  let due = 0;
  for (let start = 0; start < ENTRIES; start += COMMIT_ROWS) {
    const updates = [];
    for (let i = start; i < Math.min(ENTRIES, start + COMMIT_ROWS); i++) {
      const hash = hashOf(i);
      const day = (i * 7919) % 365;
      if (day === 0) due++;
      // day 0: r an hour ago (due); day d: r on the d-th day ahead
      const r = day === 0 ? nowS - 3600 - (i % 3600) : nowS + (day - 1) * DAY_S + 1 + (i % DAY_S);
      updates.push({ type: 'email', hash, outcome: { kind: 'mapped', u: rawUidOf(hash), p: null, r } });
    }
    updates.sort((a, b) => (a.hash < b.hash ? -1 : a.hash > b.hash ? 1 : 0));
    state.commitBatch(updates, nowS - 365 * DAY_S);
    if ((start + COMMIT_ROWS) % 1_000_000 === 0)
      process.stderr.write(`  built ${fmt(start + COMMIT_ROWS)} entries in ${sec(ms(t0))}\n`);
  }
  state.close();
  results.build_s = ms(t0) / 1000;
  results.state_mib = statSync(statePath).size / (1 << 20);
  results.due = due;
  console.log(
    `built ${fmt(ENTRIES)} entries (${fmt(due)} due) in ${sec(ms(t0))}; state file ${results.state_mib.toFixed(0)} MiB`,
  );

  // --- for scale: one walk of the whole table (what the opt-out sweep's sizing reads) ------------------------------
  const walker = openState(statePath, { envFingerprint: fingerprint, readonly: true });
  t0 = process.hrtime.bigint();
  const scanned = walker.countWithRawUid();
  results.full_scan_ms = ms(t0);
  walker.close();
  console.log(
    `for scale, one walk of the table (count of entries with a raw UID, ${fmt(scanned)}): ${results.full_scan_ms.toFixed(0)} ms`,
  );

  // --- selection of one day's due entries, cold file, through the StateStore in 5,000-entry pages ---------------
  const reader = openState(statePath, { envFingerprint: fingerprint, readonly: true });
  t0 = process.hrtime.bigint();
  const counted = reader.countDue(nowS);
  results.count_due_ms = ms(t0);
  t0 = process.hrtime.bigint();
  let selected = 0;
  let pages = 0;
  for (let after = null; ; ) {
    const page = reader.selectDue(nowS, after, 5000);
    if (page.length === 0) break;
    selected += page.length;
    pages++;
    const last = page[page.length - 1];
    after = { r: last.r, id: last.id };
  }
  results.select_due_ms = ms(t0);
  reader.close();
  if (selected !== due || counted !== due)
    throw new Error(`selected ${selected} and counted ${counted}, expected ${due}`);
  console.log(
    `countDue: ${fmt(counted)} in ${results.count_due_ms.toFixed(1)} ms; selectDue: ${fmt(selected)} entries in ${pages} pages in ${results.select_due_ms.toFixed(1)} ms`,
  );

  // --- dry run and the real remap through the built CLI ------------------------------------------------------------
  const env = childEnv(WORK, {
    UID2_BASE_URL: served.url,
    UID2_API_KEY: served.api_key,
    UID2_CLIENT_SECRET: served.client_secret,
  });
  const run = (cliArgs) =>
    new Promise((resolveRun) => {
      const started = process.hrtime.bigint();
      const child = spawn('/usr/bin/time', ['-f', '%M', process.execPath, BIN, ...cliArgs], {
        env,
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (d) => (stderr += d));
      child.once('close', (code) => {
        const lines = stderr.trim().split('\n');
        resolveRun({ code, ms: ms(started), rssKiB: Number(lines.at(-1)), stderr: lines.slice(0, -1).join('\n') });
      });
    });
  // --now: the plan and the check below use the time the state was built for, however long the build took
  const at = ['--now', String(nowS)];
  const dry = await run(['remap-due', '--state', statePath, '--dry-run', ...at]);
  results.dry_run_s = dry.ms / 1000;
  console.log(`remap-due --dry-run: exit ${dry.code} in ${sec(dry.ms)}\n${dry.stderr}`);

  const summaryPath = join(WORK, 'summary.json');
  const changesPath = join(WORK, 'changes.csv');
  const real = await run(['remap-due', '--state', statePath, '-o', changesPath, '--summary-json', summaryPath, ...at]);
  const summary = JSON.parse(readFileSync(summaryPath, 'utf8'));
  results.remap = { exit: real.code, wall_s: real.ms / 1000, peak_rss_mib: real.rssKiB / 1024, ...summary };
  console.log(
    `remap-due: exit ${real.code} in ${sec(real.ms)} wall, peak RSS ${(real.rssKiB / 1024).toFixed(0)} MiB\n${real.stderr}`,
  );
  if (summary.rows !== due) throw new Error(`remap-due remapped ${summary.rows}, expected ${due}`);

  const again = await run(['remap-due', '--state', statePath, '-o', join(WORK, 'changes-2.csv'), ...at]);
  results.second_run_s = again.ms / 1000;
  console.log(`second remap-due the same day: exit ${again.code} in ${sec(again.ms)}\n${again.stderr}`);
  console.log(JSON.stringify(results, null, 2));
} finally {
  served.child.kill('SIGTERM');
  if (!KEEP) for (const suffix of ['', '-wal', '-shm', '.lock']) rmSync(statePath + suffix, { force: true });
}
