#!/usr/bin/env node
// Benchmark of a level of key blocks alone (dist/state/key-levels.js on an in-memory SQLite database): merges
// into it, a walk of all its pairs, lookups of keys it holds and does not hold (reading blocks from the database,
// then with every block kept in memory, as a long run of lookups has them), and the bytes its blocks take.
// Not a test: the figures depend on the machine. Each rate is given per wall second and per CPU second of this
// process (the second is what a machine shared with other work still shows).
//
//   npm run build && node bench/key-levels.mjs             # 2,000,000 pairs, then 500,000 merged into them
//   node bench/key-levels.mjs 20000000                     # another size
//   node bench/key-levels.mjs --root ../other-checkout     # the build of another checkout, to compare
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const args = process.argv.slice(2);
const option = (name) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const ROOT = resolve(option('--root') ?? join(dirname(fileURLToPath(import.meta.url)), '..'));
const PAIRS = Number(args.find((a) => /^\d+$/.test(a)) ?? 2_000_000);
const LOOKUPS = 100_000;
const STATE = join(ROOT, 'dist', 'state');
if (!existsSync(join(STATE, 'key-levels.js'))) {
  console.error(`bench/key-levels.mjs: ${STATE} is missing; run \`npm run build\` first`);
  process.exit(2);
}
const levels = await import(join(STATE, 'key-levels.js'));
const { BlockBudget, LevelReader } = await import(join(STATE, 'level-reader.js'));
const { KEY_BLOCK_TABLES } = await import(join(STATE, 'schema.js'));
const Database = (await import(join(STATE, 'sqlite-driver.js'))).sqliteDriver();

/** A repeatable stream of numbers in [0, 1). */
function random(seed) {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1_664_525) + 1_013_904_223) >>> 0;
    return s / 2 ** 32;
  };
}

/** n pairs with keys spread over 47 bits and ids from `firstId` on, sorted by key. */
function pairs(n, firstId, next) {
  const keys = new Float64Array(n);
  for (let i = 0; i < n; i++) keys[i] = Math.floor((next() + next() / 2 ** 32) * 2 ** 47);
  const order = new Uint32Array(n).map((_, i) => i);
  order.sort((a, b) => keys[a] - keys[b]);
  return {
    keys: Float64Array.from(order, (i) => keys[i]),
    ids: Float64Array.from(order, (i) => firstId + i),
  };
}

const fmt = (n) => new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 }).format(n);
/** Runs `work` and prints `count` per wall and per CPU second. */
function timed(label, count, unit, work) {
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  work();
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  const used = process.cpuUsage(cpu0);
  const cpu = (used.user + used.system) / 1e6;
  console.log(
    `${label.padEnd(48)} ${fmt(count / wall).padStart(12)} ${unit}/s wall, ${fmt(count / cpu).padStart(12)} ${unit}/s CPU`,
  );
}

const db = new Database(':memory:');
db.exec(KEY_BLOCK_TABLES);
const next = random(1);
const base = pairs(PAIRS, 1, next);
const more = pairs(Math.floor(PAIRS / 4), PAIRS + 1, next);
console.log(`key levels bench: node ${process.version}, ${fmt(PAIRS)} pairs, build of ${ROOT}`);
const merge = (level, stream) => db.transaction(() => levels.mergeIntoLevel(db, level, stream))();
timed('merge into an empty level', PAIRS, 'pairs', () => merge('key_blocks', levels.arrayPairs(base.keys, base.ids)));
// every block receives pairs: the whole level is read and written again, as a fold does
timed(`merge ${fmt(more.keys.length)} into it (pairs read + written)`, PAIRS + 2 * more.keys.length, 'pairs', () =>
  merge('key_blocks', levels.arrayPairs(more.keys, more.ids)),
);
const total = PAIRS + more.keys.length;
let walked = 0;
timed('walk of the level (levelPairs)', total, 'pairs', () => {
  for (const s = levels.levelPairs(db, 'key_blocks'); s.key < Number.POSITIVE_INFINITY; s.next()) walked++;
});
if (walked !== total) throw new Error(`the walk gave ${walked} pairs of ${total}`);
const bytes = db.prepare('SELECT sum(length(keys)), count(*) FROM key_blocks').raw().get();
console.log(
  `${'blobs: bytes per pair, per block'.padEnd(48)} ${(bytes[0] / total).toFixed(3)}, ${(bytes[0] / bytes[1]).toFixed(1)} (${fmt(bytes[1])} blocks)`,
);

const reader = new LevelReader(db, 'key_blocks');
const pick = random(2);
const held = [...new Set(Array.from({ length: LOOKUPS }, () => base.keys[Math.floor(pick() * PAIRS)]))].sort(
  (a, b) => a - b,
);
const absent = pairs(LOOKUPS, 0, random(3)).keys;
let found = 0;
reader.idsOf([0], 'warm', () => {});
timed(`lookups of ${fmt(held.length)} held keys (sorted)`, held.length, 'lookups', () =>
  reader.idsOf(held, 'warm', () => found++),
);
if (found < held.length) throw new Error(`found ${found} ids for ${held.length} held keys`);
timed(`lookups of ${fmt(absent.length)} keys not held`, absent.length, 'lookups', () =>
  reader.idsOf(absent, 'warm', () => found++),
);

// every block kept (the whole level asked once), then held keys at random in sorted lists of 5,000, as a store asks
const keeping = new LevelReader(db, 'key_blocks', new BlockBudget(Number.MAX_SAFE_INTEGER));
const firsts = db.prepare('SELECT first_k FROM key_blocks ORDER BY first_k').pluck().all();
keeping.idsOf(firsts, 'warm', () => {});
const lists = [];
for (let from = 0; from < held.length; from += 5_000) {
  const picked = new Set();
  while (picked.size < Math.min(5_000, held.length - from)) picked.add(base.keys[Math.floor(pick() * PAIRS)]);
  lists.push([...picked].sort((a, b) => a - b));
}
const listed = lists.reduce((n, list) => n + list.length, 0);
let foundKept = 0;
timed(`lookups of ${fmt(listed)} held keys, blocks kept`, listed, 'lookups', () => {
  for (const list of lists) keeping.idsOf(list, 'warm', () => foundKept++);
});
if (foundKept < listed) throw new Error(`found ${foundKept} ids for ${listed} held keys with blocks kept`);
