// Benchmark of a PostgreSQL state (src/state/postgres through dist/) on a server of its own
// (bench/postgres-server.mjs): builds a state with commitBatch in map-sized batches, 1/365 of them due per day,
// then times lookups of 5,000 keys, one day's due entries, whole due walks (1% and all due) and the opt-out
// sweep's pages. Commits and lookups are timed as `map --state` asks them, several at once (--in-flight), and one
// at a time (serial). Rates are per wall second: the server's work is in another process. Run through `npm run bench:state -- --postgres`.
//
//   npm run bench:state -- --postgres                   # 1,000,000 entries, 5,000 per commit
//   npm run bench:state -- --postgres 10000000          # another size
//   npm run bench:state -- --postgres --shared-buffers 4GB   # the server's buffer cache (sized to the state unless given)
//   npm run bench:state -- --postgres --in-flight 8     # commits and lookups asked at once (4 unless given)
//   node bench/state.mjs --postgres --dist DIR          # another build's output (DIR holds state/postgres/open.js)
// Figures also go to bench/results-state-postgres.json (not committed).
import { readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { b64, DAY, firstAnswer, remapAnswer, storedKey, TODAY } from './state-entries.mjs';
import postgres from 'postgres';
import { startPostgres } from './postgres-server.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const option = (name) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
// a build of another commit can be measured by the same bench, side by side with this one
const DIST = resolve(option('--dist') ?? join(ROOT, 'dist'));
const { openPostgresState } = await import(join(DIST, 'state', 'postgres', 'open.js'));
const ENTRIES = Number(args.find((a) => /^\d+$/.test(a)) ?? 1_000_000);
const COMMIT_ROWS = Number(option('--commit-rows') ?? 5_000);
// map keeps many requests in flight and commits each answered batch as it comes, and looks up each chunk's new
// keys without waiting for the last lookup: the store sees several commits and lookups at once
const IN_FLIGHT = Number(option('--in-flight') ?? 4);
// rounds of lookups asked IN_FLIGHT at once, the median reported
const IN_FLIGHT_ROUNDS = 5;
// the entries table and its indexes take about 300 bytes an entry: the buffer cache holds them all (400 bytes an
// entry, in steps of 256MB, at least 512MB), as docs/postgres-state.md tells users to size their server
const SHARED_BUFFERS = option('--shared-buffers') ?? `${Math.max(512, Math.ceil((ENTRIES * 400) / 2 ** 28) * 256)}MB`;
const fmt = (n) => Math.round(n).toLocaleString('en-US');
const line = (label, value) => console.log(`${label.padEnd(50)} ${value}`);
const seconds = (t) => Number(process.hrtime.bigint() - t) / 1e9;
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

/** Runs task(0) ... task(n - 1) with at most `k` of them at once, in order of start. */
async function inFlight(k, n, task) {
  let next = 0;
  const lane = async () => {
    while (next < n) await task(next++);
  };
  await Promise.all(Array.from({ length: Math.min(k, n) }, lane));
}

/** A seeded uniform picker in [0, 1): every round asks for keys it has not asked before. */
function picker(seed) {
  let state = seed | 0;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// a server set up as one for this load would be: shared buffers that hold the state (a server whose buffers are
// smaller reads and writes the pages of the key index and the table through the OS's cache, a page a lookup or
// a new entry), and WAL checkpoints spaced by size rather than every 1 GB
const server = await startPostgres({ shared_buffers: SHARED_BUFFERS, max_wal_size: '8GB' });
// the server is stopped whatever ends the bench: Ctrl-C, a kill, or a reader of its output that went away
process.stdout.on('error', () => {});
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.once(signal, () => {
    server.stop().finally(() => process.exit(130));
  });
}
// the server settings that bound a commit's speed, read back and printed: durable (fsync and synchronous commit
// on, full-page writes), as a user's server would be; a user's own settings are theirs to compare
const SHOWN = [
  'fsync',
  'synchronous_commit',
  'full_page_writes',
  'wal_compression',
  'shared_buffers',
  'max_wal_size',
  'checkpoint_timeout',
];
const admin = postgres(server.url, { max: 1, onnotice: () => {} });
const serverSettings = {};
for (const name of SHOWN) serverSettings[name] = (await admin.unsafe(`SHOW ${name}`))[0][name];
await admin.end();
const results = {
  date: new Date().toISOString(),
  node: process.version,
  cpus: cpus().length,
  entries: ENTRIES,
  server: serverSettings,
};
const store = await openPostgresState(`${server.url}?schema=bench`, { envFingerprint: 'bench:local' });
// the CPU seconds of the server processes that serve the store's sessions (the first, and those lookups open
// when they begin), read from /proc: with other work on the machine, wall rates move with the load, while the CPU
// each side spends per row is what a change buys
const watcher = postgres(server.url, { max: 1, onnotice: () => {} });
const serverCpuS = async () => {
  const sessions = await watcher.unsafe(
    `SELECT pid FROM pg_stat_activity WHERE application_name = 'uid2-batch' AND pid <> pg_backend_pid()`,
  );
  let sum = 0;
  for (const { pid } of sessions) {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
      // utime and stime, in clock ticks of 1/100 s
      sum += (Number(fields[11]) + Number(fields[12])) / 100;
    } catch {
      return Number.NaN;
    }
  }
  return sum;
};
try {
  console.log(
    `state bench (PostgreSQL): node ${process.version}, ${cpus().length} CPUs, load average ${loadavg()[0].toFixed(1)}, ` +
      `${fmt(ENTRIES)} entries, ${fmt(COMMIT_ROWS)} per commit, ${DIST}`,
  );
  console.log(
    `server: ${Object.entries(serverSettings)
      .map(([k, v]) => `${k}=${v}`)
      .join(', ')}`,
  );
  // ---- build: what `map --state` writes, one commit per answered batch, IN_FLIGHT at once
  const batchOf = (first, n) => {
    const updates = new Array(n);
    for (let j = 0; j < n; j++) updates[j] = firstAnswer(first + j);
    return updates;
  };
  const buildCpu = process.cpuUsage();
  const commitServer = await serverCpuS();
  const buildStart = process.hrtime.bigint();
  let markAt = buildStart;
  let markBuilt = 0;
  let built = 0;
  await inFlight(IN_FLIGHT, Math.ceil(ENTRIES / COMMIT_ROWS), async (b) => {
    const first = b * COMMIT_ROWS;
    const n = Math.min(COMMIT_ROWS, ENTRIES - first);
    await store.commitBatch(batchOf(first, n), TODAY - 30 * DAY);
    built += n;
    if (built % 1_000_000 === 0 || built === ENTRIES) {
      const now = process.hrtime.bigint();
      line(
        `  commitBatch up to ${fmt(built)}`,
        `${fmt((built - markBuilt) / seconds(markAt))} rows/s (since the last line)`,
      );
      markAt = now;
      markBuilt = built;
    }
  });
  const inCommits = seconds(buildStart);
  const buildUsed = process.cpuUsage(buildCpu);
  const commitCpu = (buildUsed.user + buildUsed.system) / 1e6;
  results.commitRowsPerS = Math.round(ENTRIES / inCommits);
  const commitServerS = (await serverCpuS()) - commitServer;
  results.commitServerUsPerRow = Number(((commitServerS * 1e6) / ENTRIES).toFixed(2));
  line(
    `build: commitBatch of new entries, ${IN_FLIGHT} at once`,
    `${fmt(results.commitRowsPerS)} rows/s, ${inCommits.toFixed(1)} s in all, ${commitCpu.toFixed(1)} s CPU of this process ` +
      `(making the batches too), ${commitServerS.toFixed(1)} s of the server's (${results.commitServerUsPerRow} µs a row)`,
  );
  // the same one at a time (as the bench measured before), on keys after the built ones
  {
    const rates = [];
    const server0 = await serverCpuS();
    for (let b = 0; b < 20; b++) {
      const updates = batchOf(ENTRIES + b * COMMIT_ROWS, COMMIT_ROWS);
      const t = process.hrtime.bigint();
      await store.commitBatch(updates, TODAY - 30 * DAY);
      rates.push(COMMIT_ROWS / seconds(t));
    }
    const serverS = (await serverCpuS()) - server0;
    results.serialCommitRowsPerS = Math.round(median(rates));
    line(
      'commitBatch of new entries, one at a time (serial)',
      `${fmt(results.serialCommitRowsPerS)} rows/s median of 20, ${((serverS * 1e6) / (20 * COMMIT_ROWS)).toFixed(2)} µs of the server's a row`,
    );
  }

  // ---- commits of stored entries: what a remap writes (each key mapped again), one at a time, then IN_FLIGHT at once
  const rnd = picker(777);
  const storedBatch = () => Array.from({ length: COMMIT_ROWS }, () => remapAnswer(Math.floor(rnd() * ENTRIES)));
  const again = [];
  const againCpu = process.cpuUsage();
  const againServer = await serverCpuS();
  for (let round = 0; round < 20; round++) {
    const updates = storedBatch();
    const t = process.hrtime.bigint();
    await store.commitBatch(updates, TODAY);
    again.push(COMMIT_ROWS / seconds(t));
  }
  results.recommitRowsPerS = Math.round(median(again));
  const againUsed = process.cpuUsage(againCpu);
  const againServerS = (await serverCpuS()) - againServer;
  results.recommitServerUsPerRow = Number(((againServerS * 1e6) / (20 * COMMIT_ROWS)).toFixed(2));
  line(
    'commitBatch of stored entries (random), serial',
    `${fmt(results.recommitRowsPerS)} rows/s median, ` +
      `${fmt((20 * COMMIT_ROWS) / ((againUsed.user + againUsed.system) / 1e6))}/s CPU of this process, ` +
      `${fmt((20 * COMMIT_ROWS) / againServerS)}/s of the server's (${results.recommitServerUsPerRow} µs a row)`,
  );
  {
    const batches = Array.from({ length: 40 }, storedBatch);
    const server0 = await serverCpuS();
    const t = process.hrtime.bigint();
    await inFlight(IN_FLIGHT, batches.length, (b) => store.commitBatch(batches[b], TODAY));
    const wallS = seconds(t);
    const serverS = (await serverCpuS()) - server0;
    results.recommitInFlightRowsPerS = Math.round((40 * COMMIT_ROWS) / wallS);
    line(
      `commitBatch of stored entries (random), ${IN_FLIGHT} at once`,
      `${fmt(results.recommitInFlightRowsPerS)} rows/s, ${((serverS * 1e6) / (40 * COMMIT_ROWS)).toFixed(2)} µs of the server's a row`,
    );
  }

  // how many of those updates were heap-only (HOT: no index written), once the sessions' counters reach the
  // statistics (a session flushes them within about ten seconds once idle)
  await new Promise((resolve) => setTimeout(resolve, 11_000));
  const [updated] = await watcher.unsafe(
    "SELECT n_tup_upd AS n, n_tup_hot_upd AS hot FROM pg_stat_user_tables WHERE schemaname = 'bench' AND relname = 'entries'",
  );
  results.hotUpdates = { updates: Number(updated.n), heapOnly: Number(updated.hot) };
  line('  of which heap-only (HOT) updates', `${fmt(Number(updated.hot))} of ${fmt(Number(updated.n))}`);

  // ---- lookups of 5,000 keys, as `map --state` asks per chunk (one call per DII type, both at once), one chunk
  // at a time (serial), then IN_FLIGHT chunks at once
  for (const [label, hitEvery, name] of [
    ['lookupStored 5,000 keys: all stored (random)', 1, 'all'],
    ['lookupStored 5,000 keys: none stored', 0, 'none'],
    ['lookupStored 5,000 keys: half stored', 2, 'half'],
  ]) {
    const pick = picker(12_345);
    const chunkOf = (round) =>
      Array.from({ length: 5_000 }, (_, k) => {
        if (hitEvery !== 0 && k % hitEvery === 0) {
          const i = Math.floor(pick() * ENTRIES);
          return storedKey(i);
        }
        return { type: 'email', hash: b64(`absent-${round}-${k}`) };
      });
    let found = 0;
    const ask = async (keys) => {
      const asked = [];
      for (const type of ['email', 'phone']) {
        const hashes = keys.filter((k) => k.type === type).map((k) => k.hash);
        if (hashes.length > 0) asked.push(store.lookupStored(type, hashes));
      }
      for (const entries of await Promise.all(asked)) found += entries.at.length;
    };
    const rates = [];
    let cpuS = 0;
    const server0 = await serverCpuS();
    for (let round = 0; round < 40; round++) {
      const keys = chunkOf(round);
      const t = process.hrtime.bigint();
      const cpu = process.cpuUsage();
      await ask(keys);
      const used = process.cpuUsage(cpu);
      cpuS += (used.user + used.system) / 1e6;
      rates.push(5_000 / seconds(t));
    }
    results[`lookups_${name}`] = Math.round(median(rates));
    line(
      `${label}, serial`,
      `${fmt(median(rates))} lookups/s median (${fmt(found)} found), ${fmt((rates.length * 5_000) / cpuS)}/s CPU of this process, ` +
        `${fmt((rates.length * 5_000) / ((await serverCpuS()) - server0))}/s of the server's`,
    );
    // several rounds, each of its own 40 chunks: one round lasts a second or two, which a noisy machine can halve
    const rounds = Array.from({ length: IN_FLIGHT_ROUNDS }, (_, r) =>
      Array.from({ length: 40 }, (_, round) => chunkOf(40 * (r + 1) + round)),
    );
    const inFlightRates = [];
    found = 0;
    const server1 = await serverCpuS();
    const cpu = process.cpuUsage();
    for (const chunks of rounds) {
      const t = process.hrtime.bigint();
      await inFlight(IN_FLIGHT, chunks.length, (c) => ask(chunks[c]));
      inFlightRates.push((40 * 5_000) / seconds(t));
    }
    const used = process.cpuUsage(cpu);
    const asked = IN_FLIGHT_ROUNDS * 40 * 5_000;
    results[`lookupsInFlight_${name}`] = Math.round(median(inFlightRates));
    line(
      `${label}, ${IN_FLIGHT} at once`,
      `${fmt(results[`lookupsInFlight_${name}`])} lookups/s median of ${IN_FLIGHT_ROUNDS} ` +
        `(${fmt(Math.min(...inFlightRates))}–${fmt(Math.max(...inFlightRates))}; ${fmt(found)} found), ` +
        `${fmt(asked / ((used.user + used.system) / 1e6))}/s CPU of this process, ` +
        `${fmt(asked / ((await serverCpuS()) - server1))}/s of the server's`,
    );
  }

  // ---- remap-due: tomorrow, one day's entries are due
  const now = TODAY + DAY;
  let t = process.hrtime.bigint();
  const due = await store.countDue(now);
  line('countDue (one day)', `${fmt(due)} entries in ${(seconds(t) * 1000).toFixed(1)} ms`);
  t = process.hrtime.bigint();
  let walked = 0;
  for (let page = await store.selectDue(now, null, 5_000); page.length > 0; ) {
    walked += page.length;
    if (page.length < 5_000) break;
    page = await store.selectDue(now, page.at(-1), 5_000);
  }
  results.dueOneDayPerS = Math.round(walked / seconds(t));
  line("selectDue: one day's due, pages of 5,000", `${fmt(walked)} entries, ${fmt(results.dueOneDayPerS)} entries/s`);
  // a whole walk of what remap-due would send, with 1% and with every entry due (the stored commits above moved
  // some r to 400 days ahead): its wall time and the server's CPU
  for (const [name, at] of [
    ['1%', TODAY + 4 * DAY],
    ['100%', TODAY + 401 * DAY],
  ]) {
    const server0 = await serverCpuS();
    t = process.hrtime.bigint();
    let n = 0;
    for (let page = await store.selectDue(at, null, 5_000); page.length > 0; ) {
      n += page.length;
      if (page.length < 5_000) break;
      page = await store.selectDue(at, page.at(-1), 5_000);
    }
    const wallS = seconds(t);
    const serverS = (await serverCpuS()) - server0;
    results[`dueWalk_${name}`] = { entries: n, wallS: Number(wallS.toFixed(2)), serverS: Number(serverS.toFixed(2)) };
    line(
      `selectDue: a whole walk with ${name} due`,
      `${fmt(n)} entries in ${wallS.toFixed(2)} s, ${serverS.toFixed(2)} s of the server's`,
    );
  }

  // ---- the opt-out sweep: 5% of the entries from the cursor, with their checks recorded
  t = process.hrtime.bigint();
  const want = Math.ceil(ENTRIES * 0.05);
  let swept = 0;
  let after = await store.sweepCursor();
  while (swept < want) {
    const page = await store.selectForOptoutCheck(Math.min(5_000, want - swept), after);
    if (page.length === 0) break;
    await store.recordOptoutChecks(
      page.map((e) => e.id),
      now,
      page.at(-1),
    );
    swept += page.length;
    after = page.at(-1);
  }
  results.sweepPerS = Math.round(swept / seconds(t));
  line('sweep: pages + recordOptoutChecks', `${fmt(swept)} entries, ${fmt(results.sweepPerS)} entries/s`);
  t = process.hrtime.bigint();
  const tally = await store.tally([now]);
  line('tally(now) (state info)', `${JSON.stringify(tally)} in ${(seconds(t) * 1000).toFixed(0)} ms`);
  const [{ size }] = await watcher.unsafe("SELECT pg_total_relation_size('bench.entries') AS size");
  results.entriesBytes = Number(size);
  line(
    'entries table and its indexes',
    `${fmt(Number(size) / 2 ** 20)} MB, ${fmt(Number(size) / ENTRIES)} bytes an entry`,
  );
  writeFileSync(join(ROOT, 'bench', 'results-state-postgres.json'), `${JSON.stringify(results, null, 2)}\n`);
} finally {
  await store.close();
  await watcher.end();
  await server.stop();
}
