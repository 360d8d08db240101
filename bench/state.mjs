#!/usr/bin/env node
// Benchmark of the state file alone (src/state through dist/): builds a state of 5,000,000 entries with
// commitBatch in map-sized batches, 1/365 of them due per day, then times what the commands ask of it:
// selecting one day's due entries through the due lists, lookups of 5,000 keys, the opt-out sweep's
// pages from its saved cursor, the counts. Not a test: the figures depend on the machine. Each figure is given
// per wall second and per CPU second of this process (the second is what a machine shared with other work
// still shows).
//
//   npm run build && node bench/state.mjs              # 5,000,000 entries, 5,000 per commit
//   node bench/state.mjs 1000000 --commit-rows 50000   # another size, bigger transactions
//   node bench/state.mjs 5000000 --keep                # keep the file (its path is printed)
//   node bench/state.mjs --reuse /tmp/.../state.db     # measure a kept file again, without building
//   node bench/state.mjs --reuse FILE --mmap 0          # the same with openState's mmapMiB (0: no mmap)
//   npm run bench:state -- 20000000 --tail 2000000     # openState's tailEntries (entries merged at a time)
//   node bench/state.mjs --reuse FILE --cache 4         # openState's cacheSizeMiB (the page cache)
//   node bench/state.mjs --reuse FILE --key-cache 0     # openState's keyCacheMiB (key blocks kept)
//   node bench/state.mjs --reuse FILE --lookups-only    # only the lookups (no remap-due, sweep or counts)
//   npm run bench:state -- --postgres 1000000          # a PostgreSQL state instead (bench/state-postgres.mjs)
// Figures also go to bench/results-state.json (not committed).
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { b64, DAY, firstAnswer, storedKey, TODAY } from './state-entries.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const MODULE = join(ROOT, 'dist', 'state', 'index.js');
if (!existsSync(MODULE)) {
  console.error('bench/state.mjs: dist/state is missing; run `npm run build` first');
  process.exit(2);
}
if (process.argv.includes('--postgres')) {
  // the same figures of a PostgreSQL state, on a server the bench starts (state-postgres.mjs)
  await import('./state-postgres.mjs');
  process.exit(0);
}
const { openState, openStateReader } = await import(MODULE);

const args = process.argv.slice(2);
const option = (name) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const REUSE = option('--reuse');
const COMMIT_ROWS = Number(option('--commit-rows') ?? 5_000);
const KEEP = args.includes('--keep') || REUSE !== undefined;
const LOOKUPS_ONLY = args.includes('--lookups-only');
const MMAP_MIB = option('--mmap') === undefined ? undefined : Number(option('--mmap'));
const TAIL = option('--tail') === undefined ? undefined : Number(option('--tail'));
const CACHE_MIB = option('--cache') === undefined ? undefined : Number(option('--cache'));
const KEY_CACHE_MIB = option('--key-cache') === undefined ? undefined : Number(option('--key-cache'));
const results = {
  date: new Date().toISOString(),
  node: process.version,
  cpus: cpus().length,
  commitRows: COMMIT_ROWS,
  tailEntries: TAIL ?? null,
  mmapMiB: MMAP_MIB ?? 'default',
  cacheMiB: CACHE_MIB ?? 'default',
  keyCacheMiB: KEY_CACHE_MIB ?? 'default',
  perMillion: [],
};
const ENV = 'bench:local';

const dir = REUSE === undefined ? mkdtempSync(join(tmpdir(), 'uid2-bench-state-')) : dirname(REUSE);
const path = REUSE ?? join(dir, 'state.db');
const fmt = (n) => Math.round(n).toLocaleString('en-US');
const mb = (bytes) => `${(bytes / 1e6).toFixed(0)} MB`;

/**
 * A seeded uniform picker in [0, 1) (a 32-bit mix of a counter): every round asks for keys it has not asked
 * before. A multiplicative generator kept in a double loses bits and repeats after a few thousand values, which
 * would measure lookups of a few thousand keys the page cache already holds.
 */
function picker(seed) {
  let state = seed | 0;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function line(label, value) {
  console.log(`${label.padEnd(50)} ${value}`);
}

/** Wall and CPU seconds spent in fn, accumulated into `into`. */
function timed(into, fn) {
  const cpu = process.cpuUsage();
  const t = process.hrtime.bigint();
  const result = fn();
  into.wall += Number(process.hrtime.bigint() - t) / 1e9;
  const used = process.cpuUsage(cpu);
  into.cpu += (used.user + used.system) / 1e6;
  return result;
}
const clock = () => ({ wall: 0, cpu: 0 });
const rates = (n, c, unit) => `${fmt(n / c.wall)} ${unit}/s wall, ${fmt(n / c.cpu)} ${unit}/s CPU`;
/** The entries by status, and those with an r at most `nowS`: what `state info` reads, on its own connection. */
function tallied(nowS = 0) {
  const reader = openStateReader(path);
  try {
    const { byStatus, atMost } = reader.tally([nowS]);
    return { total: byStatus.mapped + byStatus.optout + byStatus.invalid, ...byStatus, due: atMost[0] };
  } finally {
    reader.close();
  }
}
const ms = (c) => `${(c.wall * 1000).toFixed(1)} ms wall, ${(c.cpu * 1000).toFixed(1)} ms CPU`;

const openedAt = process.hrtime.bigint();
const store = openState(path, {
  envFingerprint: ENV,
  ...(MMAP_MIB === undefined ? {} : { mmapMiB: MMAP_MIB }),
  ...(TAIL === undefined ? {} : { tailEntries: TAIL }),
  ...(CACHE_MIB === undefined ? {} : { cacheSizeMiB: CACHE_MIB }),
  ...(KEY_CACHE_MIB === undefined ? {} : { keyCacheMiB: KEY_CACHE_MIB }),
});
results.openMs = Number(process.hrtime.bigint() - openedAt) / 1e6;
try {
  let entries = REUSE === undefined ? 0 : tallied().total;
  console.log(
    `state bench: node ${process.version}, ${cpus().length} CPUs, load average ${loadavg()[0].toFixed(1)}, ` +
      `mmap ${MMAP_MIB ?? 'default'} MiB, cache ${CACHE_MIB ?? 'default'} MiB, key cache ${KEY_CACHE_MIB ?? 'default'} MiB, ${REUSE ? `reusing ${fmt(entries)} entries` : `${fmt(Number(args.find((a) => /^\d+$/.test(a)) ?? 5_000_000))} entries, ${fmt(COMMIT_ROWS)} per commit`}, file ${path}`,
  );

  // ---- build: what `map --state` writes, one commit per answered batch
  if (REUSE === undefined) {
    entries = Number(args.find((a) => /^\d+$/.test(a)) ?? 5_000_000);
    const total = clock();
    let lap = clock();
    let lapRows = 0;
    const start = process.hrtime.bigint();
    for (let first = 0; first < entries; first += COMMIT_ROWS) {
      const n = Math.min(COMMIT_ROWS, entries - first);
      const updates = new Array(n);
      for (let j = 0; j < n; j++) {
        const i = first + j;
        updates[j] = firstAnswer(i);
      }
      const c = clock();
      timed(c, () => store.commitBatch(updates, TODAY - 30 * DAY));
      for (const k of ['wall', 'cpu']) {
        total[k] += c[k];
        lap[k] += c[k];
      }
      lapRows += n;
      if ((first + n) % 1_000_000 === 0 || first + n === entries) {
        line(`  commitBatch up to ${fmt(first + n)}`, rates(lapRows, lap, 'rows'));
        results.perMillion.push({
          upTo: first + n,
          rowsPerS: Math.round(lapRows / lap.wall),
          rowsPerCpuS: Math.round(lapRows / lap.cpu),
        });
        lap = clock();
        lapRows = 0;
      }
    }
    line(
      'build: whole run (hashing + commits)',
      `${(Number(process.hrtime.bigint() - start) / 1e9).toFixed(1)} s wall`,
    );
    line('build: inside commitBatch', `${total.wall.toFixed(1)} s wall = ${rates(entries, total, 'rows')}`);
    results.entries = entries;
    results.commitRowsPerS = Math.round(entries / total.wall);
    const pm = results.perMillion;
    if (pm.length > 1)
      line('build: first / last lap (commit rate ratio)', (pm[0].rowsPerS / pm[pm.length - 1].rowsPerS).toFixed(2));
  }
  const size = statSync(path).size + (existsSync(`${path}-wal`) ? statSync(`${path}-wal`).size : 0);
  line('file size (db + wal)', mb(size));
  if (typeof store.checkpoint === 'function') {
    const cp = clock();
    timed(cp, () => store.checkpoint());
    line('checkpoint (TRUNCATE)', ms(cp));
  }
  const checkpointed = statSync(path).size + (existsSync(`${path}-wal`) ? statSync(`${path}-wal`).size : 0);
  results.bytesPerEntry = checkpointed / entries;
  line(
    'after checkpoint: size, bytes per entry',
    `${mb(checkpointed)}, ${(checkpointed / entries).toFixed(1)} bytes per entry`,
  );

  // ---- remap-due: tomorrow, one day's entries are due
  const now = TODAY + DAY;
  let c = clock();
  if (!LOOKUPS_ONLY) {
    const due = timed(c, () => store.countDue(now));
    line('countDue (one day)', `${fmt(due)} entries in ${ms(c)}`);
    c = clock();
    let walked = 0;
    let cursor = null;
    for (;;) {
      const page = timed(c, () => store.selectDue(now, cursor, 5_000));
      walked += page.length;
      if (page.length < 5_000) break;
      cursor = page[page.length - 1];
    }
    if (walked !== due) throw new Error(`selectDue walked ${walked} but countDue says ${due}`);
    line(
      "selectDue: one day's due, pages of 5,000",
      `${fmt(walked)} entries in ${ms(c)} (${rates(walked, c, 'entries')})`,
    );
    results.dueOneDay = { entries: walked, ms: c.wall * 1000 };
    c = clock();
    const byDay = timed(c, () => store.dueByDay(now, 7));
    line('dueByDay(7)', `${byDay.map((d) => d.count).join(' / ')} in ${ms(c)}`);
  }

  // ---- lookups: lookupStored is what `map --state` asks per 5,000 identifiers (one call per DII type, answers
  // as columns)
  // the first lookup of a store reads its keys filters from the file: timed apart, once
  c = clock();
  timed(c, () => store.lookupStored('email', [b64('first-lookup')]));
  line('first lookup (reads the keys filters)', ms(c));
  results.firstLookupMs = c.wall * 1000;
  const ROUNDS = 100;
  const lookupStored = (keys) => {
    let n = 0;
    for (const type of ['email', 'phone']) {
      const hashes = keys.filter((k) => k.type === type).map((k) => k.hash);
      if (hashes.length > 0) n += store.lookupStored(type, hashes).at.length;
    }
    return n;
  };
  for (const [label, hitEvery, lookup, name] of [
    ['lookupStored 5,000 keys: all stored (random)', 1, lookupStored, 'all'],
    // other keys at random again: the key blocks the first rounds read are kept in memory (keyCacheMiB)
    ['lookupStored 5,000 keys: all stored (random), blocks read before kept', 1, lookupStored, 'all_again'],
    ['lookupStored 5,000 keys: all stored, in arrival order', -1, lookupStored, 'all_in_order'],
    ['lookupStored 5,000 keys: none stored', 0, lookupStored, 'none'],
    ['lookupStored 5,000 keys: half stored', 2, lookupStored, 'half'],
  ]) {
    const rnd = picker(name === 'all_again' ? 54_321 : 12_345);
    let found = 0;
    c = clock();
    for (let round = 0; round < ROUNDS; round++) {
      // keys are made outside the timed part, one set at a time
      const keys = new Array(5_000);
      // in arrival order: the 5,000 identifiers of one committed batch, as a file mapped again asks for them
      const batchStart = Math.floor(rnd() * Math.max(1, entries / 5_000 - 1)) * 5_000;
      for (let k = 0; k < 5_000; k++) {
        if (hitEvery === -1) {
          const i = batchStart + k;
          keys[k] = storedKey(i);
        } else if (hitEvery !== 0 && k % hitEvery === 0) {
          const i = Math.floor(rnd() * entries);
          keys[k] = storedKey(i);
        } else {
          keys[k] = { type: 'email', hash: b64(`absent-${round}-${k}`) };
        }
      }
      found += timed(c, () => lookup(keys));
    }
    line(label, `${rates(ROUNDS * 5_000, c, 'lookups')} (${fmt(found)} found)`);
    results[`lookups_${name}`] = Math.round((ROUNDS * 5_000) / c.wall);
  }

  if (!LOOKUPS_ONLY) {
    // ---- opt-out sweep and counts
    c = clock();
    const sweep = timed(c, () => store.countWithRawUid());
    line('countWithRawUid: counts entries with a raw UID', `${fmt(sweep)} in ${ms(c)}`);
    results.countWithRawUidMs = Number((c.wall * 1000).toFixed(1));
    c = clock();
    let swept = 0;
    const start = store.sweepCursor().id;
    // what optout-check --state reads: after the saved cursor to the end of the table, then from the first entry
    for (const [from, upTo] of [
      [start, undefined],
      [0, start],
    ]) {
      let after = { id: from };
      while (swept < sweep) {
        const want = Math.min(5_000, sweep - swept);
        const page = timed(c, () => store.selectForOptoutCheck(want, after, upTo));
        if (page.length > 0)
          timed(c, () =>
            store.recordOptoutChecks(
              page.map((e) => e.id),
              now,
              page.at(-1),
            ),
          );
        swept += page.length;
        if (page.length < want) break;
        after = page.at(-1);
      }
    }
    line('sweep: pages + recordOptoutChecks', `${fmt(swept)} entries, ${rates(swept, c, 'entries')}`);
    results.sweepPerS = Math.round(swept / c.wall);
    c = clock();
    const counts = timed(c, () => tallied(now));
    line('tally(now) (state info): a scan of the table', `${JSON.stringify(counts)} in ${ms(c)}`);
  }
  line('peak RSS of this process', mb(process.resourceUsage().maxRSS * 1024));
  results.peakRssMB = Math.round((process.resourceUsage().maxRSS * 1024) / 1e6);
  line('open of the file (incl. reading the tail)', `${results.openMs.toFixed(0)} ms`);
  writeFileSync(join(ROOT, 'bench', 'results-state.json'), `${JSON.stringify(results, null, 2)}\n`);
} finally {
  store.close();
  if (KEEP) console.log(`kept ${path}`);
  else rmSync(dir, { recursive: true, force: true });
}
