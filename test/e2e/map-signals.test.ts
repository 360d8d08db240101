// Signals end a run whose input waits: a named pipe nobody writes to (or whose writer says nothing) must not keep
// the process alive past SIGTERM or a second Ctrl-C, and --summary-json still says how the run ended.
import { execFile, execFileSync } from 'node:child_process';
import { closeSync, constants, existsSync, openSync, readFileSync, readlinkSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, ROOT } from '../helpers/map-e2e-build.js';
import { tempDir } from '../helpers/map-e2e-data.js';
import { runCli, spawnCli, type CliResult, type CliRun } from '../helpers/map-e2e-processes.js';

const dir = tempDir('map-signals');
const SAMPLE = join(ROOT, 'samples', 'customers.csv');
let fifoCount = 0;

beforeAll(() => ensureBuilt(), 120_000);
afterAll(() => dir.remove());

function makeFifo(): string {
  const path = join(dir.path, `in-${++fifoCount}.csv`);
  execFileSync('mkfifo', [path]);
  return path;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Whether process `pid` holds `path` open (Linux: its /proc fd links). */
function holdsOpen(pid: number, path: string): boolean {
  try {
    return readdirSync(`/proc/${pid}/fd`).some((fd) => {
      try {
        return readlinkSync(`/proc/${pid}/fd/${fd}`) === path;
      } catch {
        return false;
      }
    });
  } catch {
    return false;
  }
}

/** Waits until the run has the pipe open (at most 15 s; a run that blocks inside open() never shows it). */
async function untilOpened(run: CliRun, path: string): Promise<void> {
  const pid = run.child.pid as number;
  for (let waited = 0; waited < 15_000 && run.child.exitCode === null; waited += 100) {
    if (holdsOpen(pid, path)) return;
    await sleep(100);
  }
}

/** The run's end, or a SIGKILL and null when it is still running after `boundMs`. */
async function endWithin(run: CliRun, boundMs: number): Promise<CliResult | null> {
  const timer = new Promise<null>((resolve) => setTimeout(() => resolve(null), boundMs));
  const ended = await Promise.race([run.done, timer]);
  if (ended === null) {
    run.child.kill('SIGKILL');
    await run.done;
  }
  return ended;
}

const summaryAt = (path: string): Record<string, unknown> =>
  JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;

describe.skipIf(process.platform !== 'linux')('map of a named pipe', () => {
  it('nobody writes: SIGTERM ends the run with 130 and the summary says interrupted', async () => {
    const fifo = makeFifo();
    const summary = join(dir.path, 'term.json');
    const out = join(dir.path, 'term.csv');
    const run = spawnCli(['map', fifo, '--env', 'local', '-o', out, '--summary-json', summary]);
    await untilOpened(run, fifo);
    run.child.kill('SIGTERM');
    const r = await endWithin(run, 10_000);
    expect(r, 'the run outlived SIGTERM by 10 s').not.toBeNull();
    expect(r?.code).toBe(130);
    expect(summaryAt(summary)).toMatchObject({ command: 'map', outcome: 'interrupted', exit_code: 130 });
    expect(existsSync(out)).toBe(false);
    expect(readdirSync(dir.path).filter((n) => n.endsWith('.tmp'))).toEqual([]);
  }, 40_000);

  it('nobody writes: a second SIGINT ends it too', async () => {
    const fifo = makeFifo();
    const run = spawnCli(['map', fifo, '--env', 'local', '-o', join(dir.path, 'int.csv')]);
    await untilOpened(run, fifo);
    run.child.kill('SIGINT');
    await sleep(200);
    if (run.child.exitCode === null) run.child.kill('SIGINT');
    const r = await endWithin(run, 10_000);
    expect(r, 'the run outlived two SIGINTs by 10 s').not.toBeNull();
    expect(r?.code).toBe(130);
  }, 40_000);

  it('a writer that says nothing: SIGTERM ends the run with 130', async () => {
    const fifo = makeFifo();
    const summary = join(dir.path, 'silent.json');
    const run = spawnCli([
      'map',
      fifo,
      '--env',
      'local',
      '-o',
      join(dir.path, 'silent.csv'),
      '--summary-json',
      summary,
    ]);
    // a non-blocking open for writing succeeds once a reader has the pipe (or is opening it)
    let writer: number | undefined;
    for (let waited = 0; writer === undefined && waited < 15_000 && run.child.exitCode === null; waited += 100) {
      try {
        writer = openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK);
      } catch {
        await sleep(100);
      }
    }
    try {
      await sleep(300);
      run.child.kill('SIGTERM');
      const r = await endWithin(run, 10_000);
      expect(r, 'the run outlived SIGTERM by 10 s').not.toBeNull();
      expect(r?.code).toBe(130);
      expect(summaryAt(summary)).toMatchObject({ outcome: 'interrupted', exit_code: 130 });
    } finally {
      if (writer !== undefined) closeSync(writer);
    }
  }, 40_000);

  it('hash of a pipe nobody writes to: SIGTERM ends it with 130, no output written', async () => {
    const fifo = makeFifo();
    const out = join(dir.path, 'hash.csv');
    const run = spawnCli(['hash', fifo, '-o', out]);
    await untilOpened(run, fifo);
    run.child.kill('SIGTERM');
    const r = await endWithin(run, 10_000);
    expect(r, 'the run outlived SIGTERM by 10 s').not.toBeNull();
    expect(r?.code).toBe(130);
    expect(r?.stderr).toMatch(/interrupted/);
    expect(existsSync(out)).toBe(false);
  }, 40_000);

  it('a pipe named .parquet: refused as a pipe at once, not as a truncated file', async () => {
    const fifo = join(dir.path, 'in.parquet');
    execFileSync('mkfifo', [fifo]);
    const r = await runCli(['map', fifo, '--env', 'local', '-o', join(dir.path, 'pq.csv')]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/Parquet cannot be read from a pipe/);
  }, 40_000);

  it('a writer that writes the file: the same output as the file itself', async () => {
    const fifo = makeFifo();
    const fromFile = await runCli(['map', SAMPLE, '--env', 'local', '-o', '-', '--quiet', '--threads', '0']);
    expect(fromFile.code).toBe(0);
    const run = spawnCli(['map', fifo, '--env', 'local', '-o', '-', '--quiet', '--threads', '0']);
    // the writer waits for the reader, as `cat FILE > FIFO` does
    const writing = promisify(execFile)('sh', ['-c', `cat "${SAMPLE}" > "${fifo}"`]);
    const r = await endWithin(run, 25_000);
    await writing;
    expect(r?.code).toBe(0);
    expect(r?.stdout).toBe(fromFile.stdout);
  }, 40_000);
});
