#!/usr/bin/env node
// Benchmark of the state file alone (src/state through dist/): builds a state of 5,000,000 entries with
// commitBatch in map-sized batches, 1/365 of them due per day, then times what the commands ask of it:
// selecting one day's due entries through the index on r, lookupMany of 5,000 keys, the opt-out sweep's
// pages, the counts. Not a test: the figures depend on the machine.
//
//   npm run build && node bench/state.mjs              # 5,000,000 entries, 5,000 per commit
//   node bench/state.mjs 1000000 --commit-rows 50000   # another size, bigger transactions
//   node bench/state.mjs 5000000 --keep                # keep the file (printed) for another look
import { hash } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const MODULE = join(ROOT, 'dist', 'state', 'index.js');
if (!existsSync(MODULE)) {
  console.error('bench/state.mjs: dist/state is missing; run `npm run build` first');
  process.exit(2);
}
const { openState } = await import(MODULE);

const args = process.argv.slice(2);
const ENTRIES = Number(args.find((a) => /^\d+$/.test(a)) ?? 5_000_000);
const flag = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const COMMIT_ROWS = flag('--commit-rows', 5_000);
const KEEP = args.includes('--keep');
const DAY = 86_400;
// a UTC midnight: the service floors r to one, so all entries of a day share r (the worst case for ties)
const TODAY = Math.floor(Date.UTC(2026, 0, 15) / 1000);

const dir = mkdtempSync(join(tmpdir(), 'uid2-bench-state-'));
const path = join(dir, 'state.db');
const b64 = (s) => hash('sha256', s, 'base64');
const seconds = (ns) => Number(ns) / 1e9;
const fmt = (n) => Math.round(n).toLocaleString('en-US');
const mb = (bytes) => `${(bytes / 1e6).toFixed(0)} MB`;

function line(label, value) {
  console.log(`${label.padEnd(52)} ${value}`);
}

console.log(`state bench: ${fmt(ENTRIES)} entries, ${fmt(COMMIT_ROWS)} per commit, node ${process.version}, file ${path}`);

const store = openState(path, { envFingerprint: 'bench:local' });
try {
  // ---- build: what `map --state` writes, one commit per answered batch
  let inCommit = 0n;
  const buildStart = process.hrtime.bigint();
  let lapStart = buildStart;
  let lapInCommit = 0n;
  let lapRows = 0;
  for (let start = 0; start < ENTRIES; start += COMMIT_ROWS) {
    const n = Math.min(COMMIT_ROWS, ENTRIES - start);
    const updates = new Array(n);
    for (let j = 0; j < n; j++) {
      const i = start + j;
      updates[j] = {
        type: i % 3 === 0 ? 'phone' : 'email',
        hash: b64(`identifier-${i}`),
        outcome: { kind: 'mapped', u: b64(`raw-${i}`), p: i % 20 === 0 ? b64(`prev-${i}`) : null, r: TODAY + (1 + (i % 365)) * DAY },
      };
    }
    const t = process.hrtime.bigint();
    store.commitBatch(updates, TODAY - 30 * DAY);
    const spent = process.hrtime.bigint() - t;
    inCommit += spent;
    lapInCommit += spent;
    lapRows += n;
    const done = start + n;
    if (done % 1_000_000 === 0 || done === ENTRIES) {
      const now = process.hrtime.bigint();
      line(`  built ${fmt(done)}`, `last lap ${fmt(lapRows / seconds(lapInCommit))} rows/s in commitBatch, ${seconds(now - lapStart).toFixed(1)} s wall`);
      lapStart = now;
      lapInCommit = 0n;
      lapRows = 0;
    }
  }
  const buildWall = seconds(process.hrtime.bigint() - buildStart);
  line('build (generation + commitBatch)', `${buildWall.toFixed(1)} s wall`);
  line('build, time inside commitBatch', `${seconds(inCommit).toFixed(1)} s = ${fmt(ENTRIES / seconds(inCommit))} rows/s`);
  const size = statSync(path).size + (existsSync(`${path}-wal`) ? statSync(`${path}-wal`).size : 0);
  line('file size (db + wal)', mb(size));

  // ---- remap-due: tomorrow, one day's entries are due
  const now = TODAY + DAY;
  let t = process.hrtime.bigint();
  const due = store.countDue(now);
  line('countDue (one day)', `${fmt(due)} entries in ${(seconds(process.hrtime.bigint() - t) * 1000).toFixed(1)} ms`);
  t = process.hrtime.bigint();
  let walked = 0;
  let cursor = null;
  for (;;) {
    const page = store.selectDue(now, cursor, 5_000);
    walked += page.length;
    if (page.length < 5_000) break;
    cursor = page[page.length - 1];
  }
  const selectS = seconds(process.hrtime.bigint() - t);
  line("selectDue: one day's due, pages of 5,000", `${fmt(walked)} entries in ${(selectS * 1000).toFixed(1)} ms = ${fmt(walked / selectS)} entries/s`);
  if (walked !== due) throw new Error(`selectDue walked ${walked} but countDue says ${due}`);
  t = process.hrtime.bigint();
  const byDay = store.dueByDay(now, 7);
  line('dueByDay(7)', `${byDay.map((d) => d.count).join(' / ')} in ${(seconds(process.hrtime.bigint() - t) * 1000).toFixed(1)} ms`);

  // ---- lookupMany: what `map --state` asks per 5,000 identifiers
  const ROUNDS = 100;
  for (const [label, hitEvery] of [
    ['lookupMany 5,000 keys, all stored (random)', 1],
    ['lookupMany 5,000 keys, none stored', 0],
    ['lookupMany 5,000 keys, half stored', 2],
  ]) {
    let seed = 12345;
    const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
    let found = 0;
    let spent = 0n;
    for (let r = 0; r < ROUNDS; r++) {
      // keys made outside the timed part; one set at a time so their memory does not count
      const keys = new Array(5_000);
      for (let k = 0; k < 5_000; k++) {
        if (hitEvery !== 0 && k % hitEvery === 0) {
          const i = Math.floor(rnd() * ENTRIES);
          keys[k] = { type: i % 3 === 0 ? 'phone' : 'email', hash: b64(`identifier-${i}`) };
        } else {
          keys[k] = { type: 'email', hash: b64(`absent-${r}-${k}`) };
        }
      }
      const t0 = process.hrtime.bigint();
      found += store.lookupMany(keys).size;
      spent += process.hrtime.bigint() - t0;
    }
    const s = seconds(spent);
    line(label, `${fmt((ROUNDS * 5_000) / s)} lookups/s (${fmt(found)} found)`);
  }

  // ---- opt-out sweep and counts
  t = process.hrtime.bigint();
  const sweep = store.sweepSize(0.05);
  line('sweepSize(0.05) (count of entries with a raw UID)', `${fmt(sweep)} in ${(seconds(process.hrtime.bigint() - t) * 1000).toFixed(0)} ms`);
  t = process.hrtime.bigint();
  let swept = 0;
  let after = null;
  while (swept < sweep) {
    const page = store.selectForOptoutCheck(Math.min(5_000, sweep - swept), after);
    if (page.length === 0) break;
    store.recordOptoutChecks(page.map((c) => c.id), now);
    swept += page.length;
    after = page[page.length - 1];
  }
  const sweepS = seconds(process.hrtime.bigint() - t);
  line('sweep pages + recordOptoutChecks', `${fmt(swept)} entries in ${sweepS.toFixed(2)} s = ${fmt(swept / sweepS)} entries/s`);
  t = process.hrtime.bigint();
  const counts = store.counts(now);
  line('counts() (a scan of the table)', `${JSON.stringify(counts)} in ${(seconds(process.hrtime.bigint() - t) * 1000).toFixed(0)} ms`);
  line('peak RSS', mb(process.resourceUsage().maxRSS * 1024));
} finally {
  store.close();
  if (KEEP) console.log(`kept ${path}`);
  else rmSync(dir, { recursive: true, force: true });
}
