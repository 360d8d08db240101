// Many runners at once on one PostgreSQL state: map, remap-due and optout-check --shard side by side, and the sweep lock.
import { existsSync, readFileSync } from 'node:fs';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runnerOfKey } from '../../src/pipeline/shard/shard-keys.js';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import { tempDir } from '../helpers/map-e2e-data.js';
import {
  type CliResult,
  runCli,
  type ServeProcess,
  serveConnection,
  spawnCli,
  startServe,
} from '../helpers/map-e2e-processes.js';
import { usePostgres } from '../helpers/postgres.js';
import { advanceDays } from '../helpers/remap-e2e.js';

const pg = usePostgres();
const dir = tempDir('postgres-runners');
const MAP_PATH = '/v3/identity/map';
const DAY_S = 86_400;

/** Distinct addresses (each identifier once in the input), some invalid, and quoted line breaks to cut around. */
function rowsText(): { text: string; distinct: number } {
  const lines = ['id,email,note'];
  let distinct = 0;
  for (let i = 0; i < 450; i++) {
    const valid = i % 41 !== 40;
    if (valid) distinct++;
    const note = i % 7 === 0 ? `"first\r\nsecond ""${i}"""` : `n${i}`;
    lines.push(`${i},${valid ? `runner.${i}@example.com` : `broken-${i}`},${note}`);
  }
  return { text: `${lines.join('\n')}\n`, distinct };
}

let serve: ServeProcess;
let input: string;
let distinct: number;

beforeAll(async () => {
  ensureBuilt();
  const rows = rowsText();
  input = dir.file('rows.csv', rows.text);
  distinct = rows.distinct;
  serve = await startServe();
}, 120_000);

afterAll(async () => {
  await serve?.stop();
  dir.remove();
});

function cli(args: string[], via: ServeProcess = serve): Promise<CliResult> {
  const { args: connection, env } = serveConnection(via);
  return runCli([...args, ...connection], { env });
}

/** Starts these runs together and waits for all of them. */
function together(runs: string[][], via: ServeProcess = serve): Promise<CliResult[]> {
  const { args: connection, env } = serveConnection(via);
  return Promise.all(runs.map((args) => spawnCli([...args, ...connection], { env }).done));
}

async function sent(path = MAP_PATH, via: ServeProcess = serve): Promise<number> {
  return (await via.stats()).items[path] ?? 0;
}

async function entriesOf(url: string): Promise<number> {
  const info = await runCli(['state', 'info', url, '--json']);
  expect(info.code, info.stderr).toBe(0);
  return (JSON.parse(info.stdout) as { entries: number }).entries;
}

/** The state's pending change rows per channel, those with none left out. */
async function pendingOf(url: string): Promise<Record<string, number>> {
  const info = await runCli(['state', 'info', url, '--json']);
  expect(info.code, info.stderr).toBe(0);
  const pending = (JSON.parse(info.stdout) as { pending_changes: Record<string, number> }).pending_changes;
  return Object.fromEntries(Object.entries(pending).filter(([, n]) => n > 0));
}

/** Waits until `via` has had more than `before` map requests, while `run` is still going. */
async function requestedAfter(via: ServeProcess, before: number, run: { child: { exitCode: number | null } }) {
  while (((await via.stats()).requests[MAP_PATH] ?? 0) <= before) {
    expect(run.child.exitCode).toBeNull();
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function rowsOf(path: string): Record<string, string>[] {
  return parse(readFileSync(path, 'utf8'), { columns: true }) as Record<string, string>[];
}

function expectOk(runs: CliResult[]): void {
  for (const r of runs) {
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).not.toContain(pg.server().password);
  }
}

describe('three runners at once on one PostgreSQL state', { timeout: 180_000 }, () => {
  let one: string;
  let shared: string;
  let nowS = 0;
  beforeAll(() => {
    one = pg.schemaUrl('one_runner');
    shared = pg.schemaUrl('three_runners');
  });

  it('map --shard K/3: the outputs end to end are the one-runner output, and each identifier is sent once', async () => {
    const oneOut = dir.file('one.csv');
    const before = await sent();
    expectOk([await cli(['map', input, '--email-col', 'email', '--quiet', '--state', one, '-o', oneOut])]);
    expect((await sent()) - before).toBe(distinct);

    const outs = [0, 1, 2].map((k) => dir.file(`share-${k}.csv`));
    const start = await sent();
    expectOk(
      await together(
        outs.map((o, k) => [
          'map',
          input,
          '--email-col',
          'email',
          '--quiet',
          '--state',
          shared,
          '--shard',
          `${k}/3`,
          '-o',
          o,
        ]),
      ),
    );
    // the shares are disjoint, so together they send what one runner sends: every distinct identifier, once
    expect((await sent()) - start).toBe(distinct);
    expect(await entriesOf(shared)).toBe(distinct);
    expect(await entriesOf(one)).toBe(distinct);
    const shares = outs.map((o) => readFileSync(o, 'utf8'));
    for (const share of shares) expect(share.split('\n').length).toBeGreaterThan(450 / 3 / 2);
    expect(shares.join('')).toBe(readFileSync(oneOut, 'utf8'));
  });

  it('remap-due --shard K/3: the shares are disjoint and together are what one unsharded remap changes', async () => {
    // two years on: every entry is due, and the service has rotated salts, so raw UIDs change
    nowS = Math.floor((await advanceDays(serve.url, 730)) / 1000);
    const remap = ['remap-due', '--now', String(nowS), '--quiet'];
    const wholeOut = dir.file('remap-one.csv');
    const before = await sent();
    expectOk([await cli([...remap, '--state', one, '-o', wholeOut])]);
    const sentByOne = (await sent()) - before;
    expect(sentByOne).toBe(distinct);
    const wholeRows = rowsOf(wholeOut);
    expect(wholeRows.length).toBeGreaterThan(0);

    const outs = [0, 1, 2].map((k) => dir.file(`remap-${k}.csv`));
    const start = await sent();
    // one after another: runners at once share one pending-changes journal (the todo below)
    for (const [k, o] of outs.entries())
      expectOk([await cli([...remap, '--state', shared, '--shard', `${k}/3`, '-o', o])]);
    expect((await sent()) - start).toBe(sentByOne);
    const union: string[] = [];
    outs.forEach((o, k) => {
      for (const row of rowsOf(o)) {
        expect(runnerOfKey(row.hash_type, row.hash, 3)).toBe(k);
        union.push(JSON.stringify(row));
      }
    });
    expect(union.sort()).toEqual(wholeRows.map((row) => JSON.stringify(row)).sort());
    const left = await cli(['remap-due', '--state', shared, '--now', String(nowS), '--dry-run']);
    expect(left.stderr).toMatch(/\b0 entries due now/);
  });

  it('remap-due --shard K/3 at once: each runner writes its own share only, each change once, together one run', async () => {
    // a year on: every entry is due again, and salts have rotated again
    const laterS = Math.floor((await advanceDays(serve.url, 365)) / 1000);
    const remap = ['remap-due', '--now', String(laterS), '--quiet'];
    const wholeOut = dir.file('at-once-one.csv');
    expectOk([await cli([...remap, '--state', one, '-o', wholeOut])]);
    const wholeRows = rowsOf(wholeOut);
    expect(wholeRows.length).toBeGreaterThan(0);

    const outs = [0, 1, 2].map((k) => dir.file(`at-once-${k}.csv`));
    expectOk(await together(outs.map((o, k) => [...remap, '--state', shared, '--shard', `${k}/3`, '-o', o])));
    const seen = new Map<string, number>();
    const union: string[] = [];
    outs.forEach((o, k) => {
      for (const row of rowsOf(o)) {
        expect(runnerOfKey(row.hash_type, row.hash, 3)).toBe(k);
        const key = `${row.hash_type} ${row.hash}`;
        expect(seen.get(key), `${key} in the files of runners ${seen.get(key)} and ${k}`).toBeUndefined();
        seen.set(key, k);
        union.push(JSON.stringify(row));
      }
    });
    expect(union.sort()).toEqual(wholeRows.map((row) => JSON.stringify(row)).sort());
    expect(await pendingOf(shared)).toEqual({});
  });

  describe('two unsharded remap-due at once', () => {
    let slow: ServeProcess;
    beforeAll(async () => {
      // answers that take seconds keep the first run holding its lock while the others start
      slow = await startServe(['--latency-ms', '6000']);
    }, 60_000);
    afterAll(async () => {
      await slow?.stop();
    });

    it('the second is refused in one line, exit 2; one with --wait runs once the first is done', async () => {
      // a year after the remap above, everything is due again
      const remap = ['remap-due', '--state', shared, '--now', String(nowS + 730 * DAY_S), '--quiet'];
      const { args: connection, env } = serveConnection(slow);
      const first = spawnCli([...remap, ...connection, '-o', dir.file('lock-first.csv')], { env });
      // the first run holds the lock from before its request until it ends
      while ((await slow.stats()).requests[MAP_PATH] === undefined) {
        expect(first.child.exitCode).toBeNull();
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const [second, waiting] = await together(
        [
          [...remap, '-o', dir.file('lock-second.csv')],
          [...remap, '--wait', '60', '-o', dir.file('lock-waiting.csv')],
        ],
        slow,
      );
      expectOk([await first.done]);
      expect(second.code).toBe(2);
      expect(second.stderr).toMatch(
        /^uid2-batch: another uid2-batch run is doing remap-due \(shard all\) of postgres:\/\/[^\n]*; wait for it to finish, or run another shard\n$/,
      );
      expect(second.stderr).not.toContain(pg.server().password);
      expectOk([waiting]);
      // the first and the waiting run each re-mapped every entry (--now is past both runs' refresh times); the
      // refused one sent nothing
      expect(rowsOf(dir.file('lock-first.csv')).length).toBeGreaterThan(0);
      expect((await slow.stats()).items[MAP_PATH]).toBe(2 * distinct);
    });

    it('an unsharded run is refused while a shard runs and the reverse, in one line; shards of one N go together', async () => {
      // far past every refresh time that the runs above set
      const remap = ['remap-due', '--state', shared, '--now', String(nowS + 1460 * DAY_S), '--quiet'];
      const { args: connection, env } = serveConnection(slow);
      let before = (await slow.stats()).requests[MAP_PATH] ?? 0;
      const shard = spawnCli([...remap, '--shard', '0/3', ...connection, '-o', dir.file('held-0.csv')], { env });
      await requestedAfter(slow, before, shard);
      const [whole, beside] = await together(
        [
          [...remap, '-o', dir.file('refused-whole.csv')],
          [...remap, '--shard', '1/3', '-o', dir.file('beside-1.csv')],
        ],
        slow,
      );
      expectOk([await shard.done, beside]);
      expect(whole.code).toBe(2);
      expect(whole.stderr).toMatch(
        /^uid2-batch: another uid2-batch run is doing remap-due \(its shards\) of postgres:\/\/[^\n]*; wait for it to finish, or run another shard\n$/,
      );

      before = (await slow.stats()).requests[MAP_PATH] ?? 0;
      const all = spawnCli([...remap, ...connection, '-o', dir.file('held-all.csv')], { env });
      await requestedAfter(slow, before, all);
      const [refused] = await together([[...remap, '--shard', '2/3', '-o', dir.file('refused-2.csv')]], slow);
      expectOk([await all.done]);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toMatch(
        /^uid2-batch: another uid2-batch run is doing remap-due \(shard all\) of postgres:\/\/[^\n]*; wait for it to finish, or run another shard\n$/,
      );
      expect(refused.stderr).not.toContain(pg.server().password);
    });
  });
});

describe('a shard interrupted after a commit', { timeout: 180_000 }, () => {
  let slow: ServeProcess;
  let url: string;
  beforeAll(async () => {
    // answers that take seconds let the run be interrupted while its batch is in flight
    slow = await startServe(['--latency-ms', '3000']);
    url = pg.schemaUrl('interrupted_shard');
  }, 60_000);
  afterAll(async () => {
    await slow?.stop();
  });

  it('its changes wait for the re-run of that shard, which writes them once; another shard never does', async () => {
    expectOk([await cli(['map', input, '--email-col', 'email', '--quiet', '--state', url], slow)]);
    const laterS = Math.floor((await advanceDays(slow.url, 400)) / 1000);
    const remap = (k: number, out: string): string[] => [
      'remap-due',
      '--state',
      url,
      '--now',
      String(laterS),
      '--quiet',
      '--shard',
      `${k}/3`,
      '-o',
      out,
    ];
    const { args: connection, env } = serveConnection(slow);
    const before = (await slow.stats()).requests[MAP_PATH] ?? 0;
    const stopped = spawnCli([...remap(0, dir.file('stopped-0.csv')), ...connection], { env });
    await requestedAfter(slow, before, stopped);
    // SIGINT lets the batch in flight commit, and writes no changes file: its rows stay in the journal
    process.kill(stopped.child.pid as number, 'SIGINT');
    expect((await stopped.done).code).toBe(130);
    expect(existsSync(dir.file('stopped-0.csv'))).toBe(false);
    const left = Object.values(await pendingOf(url)).reduce((a, b) => a + b, 0);
    expect(left).toBeGreaterThan(0);

    expectOk([await cli(remap(1, dir.file('other-1.csv')), slow)]);
    const other = rowsOf(dir.file('other-1.csv'));
    expect(other.length).toBeGreaterThan(0);
    for (const row of other) expect(runnerOfKey(row.hash_type, row.hash, 3)).toBe(1);
    expect(await pendingOf(url)).toEqual({ 'remap 0/3': left });

    expectOk([await cli(remap(0, dir.file('rerun-0.csv')), slow)]);
    const rerun = rowsOf(dir.file('rerun-0.csv'));
    expect(rerun.length).toBe(left);
    expect(new Set(rerun.map((row) => `${row.hash_type} ${row.hash}`)).size).toBe(left);
    for (const row of rerun) expect(runnerOfKey(row.hash_type, row.hash, 3)).toBe(0);
    expect(await pendingOf(url)).toEqual({});
    expectOk([await cli(remap(0, dir.file('again-0.csv')), slow)]);
    expect(rowsOf(dir.file('again-0.csv'))).toEqual([]);
  });
});

describe('optout-check --state --shard K/3: three sweeps at once on one PostgreSQL state', { timeout: 180_000 }, () => {
  it('each writes its own share only, no entry twice, and together what one unsharded sweep finds', async () => {
    const one = pg.schemaUrl('optout_one_runner');
    const shared = pg.schemaUrl('optout_three_runners');
    for (const url of [one, shared])
      expectOk([await cli(['map', input, '--email-col', 'email', '--quiet', '--state', url])]);
    const sweep = ['optout-check', '--quiet'];
    const wholeOut = dir.file('sweep-one.csv');
    expectOk([await cli([...sweep, '--state', one, '-o', wholeOut])]);
    const wholeRows = rowsOf(wholeOut);
    // every valid address was mapped, and each has a raw UID to check (and some a previous one too)
    expect(new Set(wholeRows.map((row) => `${row.hash_type} ${row.hash}`)).size).toBe(distinct);

    const outs = [0, 1, 2].map((k) => dir.file(`sweep-${k}.csv`));
    expectOk(await together(outs.map((o, k) => [...sweep, '--state', shared, '--shard', `${k}/3`, '-o', o])));
    const seen = new Map<string, number>();
    const union: string[] = [];
    outs.forEach((o, k) => {
      const rows = rowsOf(o);
      expect(rows.length).toBeGreaterThan(0);
      for (const row of rows) {
        expect(runnerOfKey(row.hash_type, row.hash, 3)).toBe(k);
        // an entry's raw UID and previous raw UID are two rows of one runner's file, never of two
        const key = `${row.hash_type} ${row.hash}`;
        expect(seen.get(key) ?? k, `${key} in the files of runners ${seen.get(key)} and ${k}`).toBe(k);
        seen.set(key, k);
        union.push(JSON.stringify(row));
      }
    });
    expect(union.sort()).toEqual(wholeRows.map((row) => JSON.stringify(row)).sort());
    expect(await pendingOf(shared)).toEqual({});
  });
});
