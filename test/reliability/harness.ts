import { existsSync, readdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { basename, join } from 'node:path';
import { EntryView } from '../../src/state/entry-record.js';
import { lockPathOf } from '../../src/state/lock.js';
import Database from '../helpers/sqlite-driver.js';
import { ROOT } from '../helpers/map-e2e-build.js';
import { spawnCli, type CliResult, type CliRun, type ServeProcess } from '../helpers/map-e2e-processes.js';

/**
 * Shared parts of the reliability suite: the size knob, a seeded random source, the built CLI against `serve`
 * processes, and the checks every crash or fault scenario ends with (state integrity, output files, stderr).
 */

/** RELIABILITY_SCALE=4 runs four times the rows, crash points and fuzz requests (the default 1 suits CI). */
export const SCALE = (() => {
  const raw = process.env.RELIABILITY_SCALE;
  const n = raw === undefined || raw === '' ? 1 : Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`RELIABILITY_SCALE must be a positive number (got '${raw}')`);
  return n;
})();

export const scaled = (n: number): number => Math.max(1, Math.round(n * SCALE));

/**
 * The suite runs the CLI from dist/ and never builds it: `npm test` and `npm run test:reliability` run tsc once
 * before vitest, and a build per test file would rewrite dist/ under the feet of the other files' processes.
 */
export function requireBuilt(): void {
  if (!existsSync(join(ROOT, 'dist', 'cli', 'main.js'))) {
    throw new Error(
      'dist/cli/main.js is missing: run `npm run build` (npm test and npm run test:reliability build first)',
    );
  }
}

/** mulberry32: small, seeded, good enough to pick crash points and fuzz cases reproducibly. */
export function seeded(seed: number): { next(): number; int(n: number): number; pick<T>(items: readonly T[]): T } {
  let a = seed >>> 0;
  const next = (): number => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number): number => Math.floor(next() * n);
  return { next, int, pick: (items) => items[int(items.length)] as (typeof items)[number] };
}

/** A free loopback port, for a `serve` that must come back on the same address after a restart. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls `probe` until it returns true; false when `timeoutMs` passes first. */
export async function waitUntil(
  probe: () => Promise<boolean> | boolean,
  timeoutMs: number,
  everyMs = 15,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await probe()) return true;
    await sleep(everyMs);
  }
  return false;
}

/** A stack frame line as Node prints it. A user must never see one. */
export function stackLines(stderr: string): string[] {
  return stderr.split('\n').filter((line) => /^\s+at\s/.test(line));
}

export { tempDir } from '../helpers/map-e2e-data.js';

/** Files in `dir` other than `except`: what an interrupted run left behind. */
export function leftovers(dir: string, except: readonly string[]): string[] {
  return readdirSync(dir).filter((name) => !except.includes(name));
}

/** What a run left in its folder besides `state.db` and what belongs to it (its WAL, shared memory and lock). */
export function leftoversBesideState(dir: string): string[] {
  return leftovers(dir, ['state.db', 'state.db-wal', 'state.db-shm', basename(lockPathOf(join(dir, 'state.db')))]);
}

// ----------------------------------------------------------------------------------------------------------------
// `serve` helpers

export interface Stats {
  requests: Record<string, number>;
  items: Record<string, number>;
  faults: Record<string, number>;
  now_ms: number;
}

export async function statsOf(url: string): Promise<Stats> {
  const res = await fetch(`${url}/_local/stats`);
  return (await res.json()) as Stats;
}

export async function clockOf(url: string): Promise<number> {
  const res = await fetch(`${url}/_local/clock`);
  return ((await res.json()) as { now_ms: number }).now_ms;
}

export async function advanceClock(url: string, days: number): Promise<number> {
  const res = await fetch(`${url}/_local/clock`, {
    method: 'POST',
    body: JSON.stringify({ advance_days: days }),
    headers: { 'content-type': 'application/json' },
  });
  if (res.status !== 200) throw new Error(`POST /_local/clock: HTTP ${res.status}`);
  return ((await res.json()) as { now_ms: number }).now_ms;
}

export async function optOut(url: string, body: Record<string, string | number>): Promise<void> {
  const res = await fetch(`${url}/_local/optout`, {
    method: 'POST',
    body: JSON.stringify(body),
    headers: { 'content-type': 'application/json' },
  });
  if (res.status !== 200) throw new Error(`POST /_local/optout: HTTP ${res.status} ${await res.text()}`);
}

export const MAP_PATH = '/v3/identity/map';
export const OPTOUT_PATH = '/v2/optout/status';
export const REFRESH_PATH = '/v2/token/refresh';

/** Every fault the service injected, of any kind. */
export function faultCount(stats: Stats): number {
  return Object.values(stats.faults).reduce((a, b) => a + b, 0);
}

/** The environment that points the CLI at a serve process (credentials by variable, never in argv). */
export function serveEnv(
  serve: Pick<ServeProcess, 'url' | 'apiKey' | 'clientSecret'>,
  extra: Record<string, string> = {},
): Record<string, string> {
  return { UID2_BASE_URL: serve.url, UID2_API_KEY: serve.apiKey, UID2_CLIENT_SECRET: serve.clientSecret, ...extra };
}

// ----------------------------------------------------------------------------------------------------------------
// Killing the CLI at a chosen point

export type KillSignal = 'SIGKILL' | 'SIGINT' | 'SIGTERM';

export interface KillPoint {
  signal: KillSignal;
  /** Kill once the service has seen this many requests on `path` from this run (0: do not wait for one). */
  afterRequests: number;
  /** Then wait this long. */
  delayMs: number;
}

export interface KilledRun extends CliResult {
  /** False when the run ended on its own before the kill point was reached. */
  killed: boolean;
}

/**
 * Spawns the CLI and sends `point.signal` by PID when the service has counted `point.afterRequests` requests on
 * `path` since the spawn (polled every few ms) and `point.delayMs` more have passed.
 */
export async function runAndKill(
  args: string[],
  env: Record<string, string>,
  serveUrl: string,
  path: string,
  point: KillPoint,
): Promise<KilledRun> {
  const base = (await statsOf(serveUrl)).requests[path] ?? 0;
  const run: CliRun = spawnCli(args, { env });
  let ended = false;
  const done = run.done.then((r) => {
    ended = true;
    return r;
  });
  let killed = false;
  const trigger = (async () => {
    if (point.afterRequests > 0) {
      await waitUntil(
        async () => ended || ((await statsOf(serveUrl)).requests[path] ?? 0) - base >= point.afterRequests,
        60_000,
        10,
      );
    }
    if (point.delayMs > 0) await sleep(point.delayMs);
    if (!ended && run.child.pid !== undefined) {
      killed = true;
      process.kill(run.child.pid, point.signal);
    }
  })();
  const result = await done;
  await trigger;
  // a signal sent while the process was already on its way out finds the work done: it ended 0 by itself
  const finishedFirst = result.code === 0 && result.signal === null;
  return { ...result, killed: killed && !finishedFirst };
}

// ----------------------------------------------------------------------------------------------------------------
// The state file, read from outside

export interface StoredEntry {
  status: number;
  u: string | null;
  p: string | null;
  r: number | null;
  optedOutSince: number | null;
  lastOptoutCheck: number | null;
}

export interface StateReport {
  integrity: string;
  entries: Map<string, StoredEntry>;
  /** Rows that no whole transaction of this program writes: a mapped entry without u or r, a tombstone with a u... */
  halfWritten: string[];
  runs: { command: string; finished: boolean; exitCode: number | null }[];
}

const B64_44 = /^[A-Za-z0-9+/]{43}=$/;

/**
 * Opens the state file read-only with the bare SQLite driver (not through openState, so the check does not share
 * the code it checks), runs PRAGMA integrity_check and reads every entry.
 */
export function inspectState(path: string): StateReport {
  // a kill while a new file was switched to WAL leaves SQLite's rollback journal, which only a connection that may
  // write rolls back (as the next run's open does)
  const db = new Database(path, { readonly: !existsSync(`${path}-journal`), fileMustExist: true });
  try {
    const findings = db.pragma('integrity_check') as { integrity_check: string }[];
    const integrity = findings.map((f) => f.integrity_check).join('\n');
    // a process killed between creating the file and its first transaction leaves a file with no schema: as good
    // as no file (the next run initializes it)
    const tables = db.prepare("SELECT name FROM sqlite_schema WHERE type = 'table'").pluck().all() as string[];
    if (!tables.includes('entries'))
      return {
        integrity,
        entries: new Map(),
        halfWritten: tables.length > 0 ? [`tables without entries: ${tables.join(', ')}`] : [],
        runs: [],
      };
    // each entry's values are packed in its record (src/state/entry-record.ts)
    const view = new EntryView();
    const rows = (db.prepare('SELECT record FROM entries').pluck().all() as Buffer[]).map((record) => {
      view.read(record, 0);
      const v = view.values();
      return {
        type: v.type,
        hash: v.hash,
        status: v.status,
        u: v.u,
        p: v.p,
        r: v.r,
        optedOutSince: v.optedOutSinceMs,
        lastOptoutCheck: v.lastOptoutCheckS,
      };
    });
    const entries = new Map<string, StoredEntry>();
    const halfWritten: string[] = [];
    // hashes and raw UIDs are kept as the bytes of their base64 text: compared here as that text
    const textOfStored = (v: unknown): string | null =>
      Buffer.isBuffer(v) ? v.toString('base64') : typeof v === 'string' ? v : null;
    for (const stored of rows) {
      const row = {
        ...stored,
        hash: textOfStored(stored.hash) ?? '',
        u: textOfStored(stored.u),
        p: textOfStored(stored.p),
      };
      const key = `${row.type}:${row.hash}`;
      entries.set(key, {
        status: row.status,
        u: row.u,
        p: row.p,
        r: row.r,
        optedOutSince: row.optedOutSince,
        lastOptoutCheck: row.lastOptoutCheck,
      });
      const bad =
        !B64_44.test(row.hash) ||
        (row.status === 1 && (row.u === null || !B64_44.test(row.u) || row.r === null)) ||
        (row.status !== 1 && row.u !== null) ||
        (row.p !== null && !B64_44.test(row.p)) ||
        ![1, 2, 3].includes(row.status);
      if (bad) halfWritten.push(key);
    }
    const runs = (
      db.prepare('SELECT command, finished_at, exit_code FROM runs ORDER BY id').all() as {
        command: string;
        finished_at: number | null;
        exit_code: number | null;
      }[]
    ).map((r) => ({ command: r.command, finished: r.finished_at !== null, exitCode: r.exit_code }));
    return { integrity, entries, halfWritten, runs };
  } finally {
    db.close();
  }
}

/** The entries as comparable text: what a run leaves behind, without the times of day it ran. */
export function entriesText(entries: Map<string, StoredEntry>, withOptoutChecks = false): string[] {
  return [...entries]
    .map(
      ([k, e]) =>
        `${k} ${e.status} ${e.u ?? '-'} ${e.p ?? '-'} ${e.r ?? '-'} ${e.optedOutSince ?? '-'}${withOptoutChecks ? ` ${e.lastOptoutCheck === null ? 'unchecked' : 'checked'}` : ''}`,
    )
    .sort();
}

/**
 * `n` seeded kill points, the `signals` in turn (SIGKILL and SIGINT unless given): each after a random number of
 * requests in [1, maxRequests] plus a random delay of up to `maxDelayMs`.
 */
export function killPoints(
  seed: number,
  n: number,
  maxRequests: number,
  maxDelayMs: number,
  signals: readonly KillSignal[] = ['SIGKILL', 'SIGINT'],
): KillPoint[] {
  const random = seeded(seed);
  return Array.from({ length: n }, (_, i) => ({
    signal: signals[i % signals.length] as KillSignal,
    afterRequests: 1 + random.int(Math.max(1, maxRequests)),
    delayMs: random.int(maxDelayMs + 1),
  }));
}

/** How a killed run ended: SIGKILL leaves no exit code; SIGINT and SIGTERM are handled and end with 130. */
export function describeEnd(run: { code: number | null; signal: NodeJS.Signals | null }): string {
  return run.signal !== null ? run.signal : `exit ${run.code}`;
}
