import { existsSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openState } from '../../src/state/index.js';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import { emailOfRow, emailRows, tempDir } from '../helpers/map-e2e-data.js';
import { runCli, serveConnection, spawnCli, startServe, type ServeProcess } from '../helpers/map-e2e-processes.js';
import { countsOf } from '../state/lookups.js';

// Crash, Ctrl-C and a 429 storm: a re-run of the same command sends only what is missing and writes the same
// output as an undisturbed run.
const MAP_PATH = '/v3/identity/map';
const ROWS = 200_000;
let serve: ServeProcess;
const dir = tempDir('resume');
let input: string;
let undisturbed: string;

/** Distinct valid identifiers of emailRows(n). */
function distinctValid(n: number): number {
  const seen = new Set<string>();
  for (let i = 0; i < n; i++) {
    const email = emailOfRow(i);
    if (!email.startsWith('broken')) seen.add(email);
  }
  return seen.size;
}

async function itemsSent(s: ServeProcess): Promise<number> {
  return (await s.stats()).items[MAP_PATH] ?? 0;
}

/** Entries a running map has committed to its state file so far (0 before the file has its tables). */
function committedEntries(state: string): number {
  if (!existsSync(state)) return 0;
  try {
    const store = openState(state, { envFingerprint: 'UID2:local', readonly: true });
    try {
      return countsOf(store).entries;
    } finally {
      store.close();
    }
  } catch {
    return 0;
  }
}

async function waitFor(check: () => Promise<boolean>, what: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

beforeAll(async () => {
  ensureBuilt();
  // some latency, so that a run is still going when it is killed
  serve = await startServe(['--latency-ms', '40']);
  input = dir.file('input.csv', emailRows(ROWS));
  const c = serveConnection(serve);
  const res = await runCli(['map', input, '-o', dir.file('undisturbed.csv'), '--quiet', ...c.args], { env: c.env });
  expect(res.code).toBe(0);
  undisturbed = readFileSync(dir.file('undisturbed.csv'), 'utf8');
}, 120_000);

afterAll(async () => {
  await serve?.stop();
  dir.remove();
});

describe('map resumes from the state file', () => {
  it('after SIGKILL mid-run: the re-run sends only what was not committed, and the output equals an undisturbed run', async () => {
    const c = serveConnection(serve);
    const state = dir.file('killed.db');
    const output = dir.file('killed.csv');
    const args = [
      'map',
      input,
      '-o',
      output,
      '--state',
      state,
      '--quiet',
      '--summary-json',
      dir.file('killed-summary.json'),
      ...c.args,
    ];
    const before = await itemsSent(serve);
    const first = spawnCli(args, { env: c.env });
    try {
      // commits trail the answers (the state has a thread of its own), so wait for one to be in the file too
      await waitFor(
        async () => (await itemsSent(serve)) - before >= 60_000 && committedEntries(state) > 0,
        'the first 60,000 identifiers to reach the service and a batch to be committed',
      );
    } finally {
      process.kill(first.child.pid as number, 'SIGKILL');
    }
    const killed = await first.done;
    expect(killed.signal).toBe('SIGKILL');
    expect(existsSync(output)).toBe(false);

    // requests the service had already taken are answered after the client died; let them finish
    await new Promise((r) => setTimeout(r, 300));
    const afterKill = await itemsSent(serve);
    const store = openState(state, { envFingerprint: 'UID2:local', readonly: true });
    const committed = countsOf(store).entries;
    store.close();
    const distinct = distinctValid(ROWS);
    expect(committed).toBeGreaterThan(0);
    expect(committed).toBeLessThan(distinct);

    const second = await runCli(args, { env: c.env });
    expect(second.code).toBe(0);
    const sentByRerun = (await itemsSent(serve)) - afterKill;
    expect(sentByRerun).toBe(distinct - committed);
    expect(readFileSync(output, 'utf8')).toBe(undisturbed);
    const summary = JSON.parse(readFileSync(dir.file('killed-summary.json'), 'utf8'));
    expect(summary.rows).toBe(ROWS);
    expect(summary.from_state).toBeGreaterThanOrEqual(committed);

    // a third run has nothing left to send
    const third = await runCli(args, { env: c.env });
    expect(third.code).toBe(0);
    expect((await itemsSent(serve)) - afterKill).toBe(sentByRerun);
    expect(readFileSync(output, 'utf8')).toBe(undisturbed);
  }, 120_000);

  it('after Ctrl-C: exit 130, no output file, and the re-run completes the same output', async () => {
    const c = serveConnection(serve);
    const small = dir.file('small.csv', emailRows(30_000));
    const state = dir.file('interrupted.db');
    const output = dir.file('interrupted.csv');
    const args = [
      'map',
      small,
      '-o',
      output,
      '--state',
      state,
      '--batch-size',
      '1000',
      '--concurrency',
      '2',
      ...c.args,
    ];
    const before = await itemsSent(serve);
    const run = spawnCli(args, { env: c.env });
    try {
      await waitFor(async () => (await itemsSent(serve)) - before >= 3_000, 'a few batches');
    } finally {
      process.kill(run.child.pid as number, 'SIGINT');
    }
    const interrupted = await run.done;
    expect(interrupted.code).toBe(130);
    expect(interrupted.stderr).toMatch(/re-run the same command to resume/);
    expect(existsSync(output)).toBe(false);
    const resumed = await runCli(args, { env: c.env });
    expect(resumed.code).toBe(0);
    const reference = await runCli(['map', small, '--quiet', ...c.args], { env: c.env });
    expect(readFileSync(output, 'utf8')).toBe(reference.stdout);
  }, 60_000);
});

describe('map through a 429 storm, 500s and dropped connections', () => {
  let faulty: ServeProcess;
  beforeAll(async () => {
    faulty = await startServe([
      '--fault-429',
      '0.3',
      '--fault-500',
      '0.05',
      '--fault-drop',
      '0.02',
      '--latency-ms',
      '50',
    ]);
  });
  afterAll(async () => {
    await faulty?.stop();
  });

  it('gives output identical to a fault-free run', async () => {
    const small = dir.file('faults.csv', emailRows(20_000, 'storm'));
    const clean = serveConnection(serve);
    const reference = await runCli(['map', small, '--quiet', '--batch-size', '1000', ...clean.args], {
      env: clean.env,
    });
    expect(reference.code).toBe(0);

    const f = serveConnection(faulty);
    const summaryPath = dir.file('faults-summary.json');
    const res = await runCli(
      ['map', small, '--batch-size', '1000', '--max-attempts', '20', '--summary-json', summaryPath, ...f.args],
      { env: f.env },
    );
    expect(res.code).toBe(0);
    expect(res.stdout).toBe(reference.stdout);
    const summary = JSON.parse(readFileSync(summaryPath, 'utf8'));
    expect(summary.http_429).toBeGreaterThan(0);
    expect(summary.retries).toBeGreaterThanOrEqual(summary.http_429);
    expect(summary.status.error).toBe(0);
  }, 90_000);
});
