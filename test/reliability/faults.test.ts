import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { parse } from 'csv-parse/sync';
import { stringify } from 'csv-stringify/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prepareIdentifier } from '../../src/identity/index.js';
import { runCli, startServe, type CliResult, type ServeProcess } from '../helpers/map-e2e-processes.js';
import {
  advanceClock,
  clockOf,
  entriesText,
  faultCount,
  freePort,
  inspectState,
  MAP_PATH,
  requireBuilt,
  scaled,
  serveEnv,
  sleep,
  stackLines,
  statsOf,
  tempDir,
  waitUntil,
} from './harness.js';
import { recordWhenPassed } from './results.js';

/**
 * Faults: the built CLI against `uid2-batch serve` processes that answer 429 storms, rate-limit bursts, 500s,
 * dropped connections, seconds of latency, and that stop and come back mid-run. Every run must end with exit 0,
 * or 3 with a reason on each row in error, and re-running completes it; the final output must equal a fault-free
 * run's, row for row. All serves share one seed, one key pair and one opt-out file, so their answers are the same.
 */

const SEED = 'reliability-faults';
const API_KEY = `UID2-L-L-${randomBytes(15).toString('base64url')}`;
const CLIENT_SECRET = randomBytes(32).toString('base64');
const ROWS = scaled(6000);
const BATCH = '500';
/** Rows the test opts out through the service's opt-out file: by email, and by the raw UID of others. */
const OPTOUT_EMAILS = [20, 21, 22, 23, 24];
const OPTOUT_RAW_ROWS = [10, 11, 12, 13, 14];
const SINCE_MS = Date.UTC(2026, 0, 15, 12, 0, 0);

const dir = tempDir('faults');
const serves: ServeProcess[] = [];
const figures = {
  faults_injected: 0,
  delayed_answers: 0,
  restarts: 0,
  runs: 0,
  exit3_runs: 0,
  outputs_compared: 0,
  rows_compared: 0,
  rows_lost: 0,
};

let optoutFile: string;
let inputFile: string;
let rawUidFile: string;
let tokenInput: string;
let baselineMap: string;
let baselineOptout: string;
let baselineTokens: Record<string, string>[];
let baselineRemap: { changes: string[]; entries: string[] };

function serveArgs(extra: string[] = []): string[] {
  return [
    '--seed',
    SEED,
    '--api-key',
    API_KEY,
    '--client-secret',
    CLIENT_SECRET,
    ...(optoutFile ? ['--optout-file', optoutFile] : []),
    ...extra,
  ];
}

async function serve(extra: string[] = []): Promise<ServeProcess> {
  const s = await startServe(serveArgs(extra));
  serves.push(s);
  return s;
}

/** Stops a serve after reading what it injected. */
async function retire(s: ServeProcess): Promise<void> {
  if (!serves.includes(s)) return;
  try {
    figures.faults_injected += faultCount(await statsOf(s.url));
  } catch {
    // already gone
  }
  await s.stop();
  serves.splice(serves.indexOf(s), 1);
}

function inputCsv(n: number): string {
  const rows: string[][] = [['id', 'email', 'phone']];
  for (let i = 0; i < n; i++) {
    let email = `person${i}@example.com`;
    if (i % 7 === 3) email = email.toUpperCase();
    if (i % 13 === 5) email = `Person.${i}+news@gmail.com`;
    if (i % 50 === 49) email = `broken-${i}`;
    if (i % 97 === 96) email = `person${i - 90}@example.com`;
    if (i === 30) email = 'optout@example.com';
    let phone = i % 5 < 3 ? `+1415${String(1_000_000 + i).slice(-7)}` : '';
    if (i % 41 === 7) phone = '415-555-0100';
    if (i === 31) phone = '+00000000000';
    rows.push([String(i), email, phone]);
  }
  return stringify(rows);
}

const table = (text: string): Record<string, string>[] => parse(text, { columns: true }) as Record<string, string>[];

function mapArgs(out: string, extra: string[] = []): string[] {
  return [
    'map',
    inputFile,
    '--email-col',
    'email',
    '--phone-col',
    'phone',
    '--batch-size',
    BATCH,
    '-o',
    out,
    '-q',
    ...extra,
  ];
}

function expectNoStack(res: CliResult): void {
  expect(stackLines(res.stderr), res.stderr).toEqual([]);
}

/** Rows of `got` that differ from `want` (or are missing), counted the same way in every scenario. */
function compareRows(want: string, got: string): number {
  const a = want.split('\n');
  const b = got.split('\n');
  let differ = Math.abs(a.length - b.length);
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) differ++;
  figures.outputs_compared++;
  figures.rows_compared += a.length - 2;
  figures.rows_lost += differ;
  return differ;
}

/**
 * Runs a command until it exits 0: each run must end 0 or 3 (with a reason on every row in error), and after
 * `maxRuns` it must be done. Returns the runs.
 */
async function untilDone(
  args: string[],
  env: Record<string, string>,
  options: {
    maxRuns?: number;
    errorRows?: () => Record<string, string>[];
    cells?: (row: Record<string, string>) => Cell[];
  } = {},
): Promise<CliResult[]> {
  const runs: CliResult[] = [];
  for (let i = 0; i < (options.maxRuns ?? 6); i++) {
    const res = await runCli(args, { env });
    runs.push(res);
    figures.runs++;
    expectNoStack(res);
    expect([0, 3], res.stderr).toContain(res.code);
    if (res.code === 0) return runs;
    figures.exit3_runs++;
    if (options.errorRows && options.cells) {
      const failed = options
        .errorRows()
        .flatMap(options.cells)
        .filter((c) => c.status === 'error');
      expect(failed.length, res.stderr).toBeGreaterThan(0);
      expect(failed.filter((c) => c.reason === '')).toEqual([]);
    }
  }
  throw new Error(
    `still not done after ${runs.length} runs: ${runs.map((r) => r.code).join(', ')}\n${runs.at(-1)?.stderr}`,
  );
}

/** A status and its reason: each identifier cell of a map row, or the one verdict of another command's row. */
interface Cell {
  status: string;
  reason: string;
}

const mapCells = (row: Record<string, string>): Cell[] => [
  { status: row.email_status ?? '', reason: row.email_reason ?? '' },
  { status: row.phone_status ?? '', reason: row.phone_reason ?? '' },
];

/** map with --state until done; the final output. */
async function mapThrough(
  s: Pick<ServeProcess, 'url' | 'apiKey' | 'clientSecret'>,
  name: string,
  extra: string[] = [],
): Promise<{ out: string; runs: CliResult[]; state: string }> {
  const out = dir.file(`${name}.csv`);
  const state = dir.file(`${name}.db`);
  const runs = await untilDone(mapArgs(out, ['--state', state, ...extra]), serveEnv(s), {
    errorRows: () => table(readFileSync(out, 'utf8')),
    cells: mapCells,
  });
  return { out: readFileSync(out, 'utf8'), runs, state };
}

recordWhenPassed('faults', () => figures);

beforeAll(async () => {
  requireBuilt();
  inputFile = dir.file('input.csv', inputCsv(ROWS));
  // a first service tells the raw UIDs of the rows that are then opted out by raw UID
  const first = await serve();
  const probe = dir.file('probe.csv');
  const res = await runCli(mapArgs(probe), { env: serveEnv(first) });
  expect(res.code, res.stderr).toBe(0);
  await retire(first);
  const probeRows = table(readFileSync(probe, 'utf8'));
  const optouts: string[][] = [['email', 'advertising_id', 'since_ms']];
  for (const i of OPTOUT_EMAILS) optouts.push([`person${i}@example.com`, '', String(SINCE_MS)]);
  for (const i of OPTOUT_RAW_ROWS) optouts.push(['', probeRows[i]!.email_raw_uid!, String(SINCE_MS)]);
  optoutFile = dir.file('optouts.csv', stringify(optouts));
  // raw UIDs to check: every mapped one, a few opted out by raw UID, and some that are not raw UIDs at all
  const ids: string[][] = [['advertising_id']];
  probeRows.forEach((r, i) => {
    if (r.email_raw_uid) ids.push([r.email_raw_uid]);
    if (i % 100 === 1) ids.push([`not-a-raw-uid-${i}`]);
  });
  rawUidFile = dir.file('raw-uids.csv', stringify(ids));
  const tokenRows: string[][] = [['identifier', 'identifier_type']];
  for (let i = 0; i < scaled(40); i++)
    tokenRows.push(
      i % 4 === 3 ? [`+1415${String(2_000_000 + i).slice(-7)}`, 'phone'] : [`token.person${i}@example.com`, 'email'],
    );
  tokenRows.push(['optout@example.com', 'email'], ['not-an-email', 'email']);
  tokenInput = dir.file('token-input.csv', stringify(tokenRows));

  // the fault-free baselines
  const base = await serve();
  const out = dir.file('baseline.csv');
  const mapped = await runCli(mapArgs(out), { env: serveEnv(base) });
  expect(mapped.code, mapped.stderr).toBe(0);
  baselineMap = readFileSync(out, 'utf8');
  const statuses = table(baselineMap);
  expect(statuses.filter((r) => r.email_status === 'optout').length).toBeGreaterThanOrEqual(OPTOUT_EMAILS.length);
  expect(statuses.filter((r) => r.email_status === 'mapped').length).toBeGreaterThan(ROWS * 0.8);

  const optOut = dir.file('baseline-optout.csv');
  const checked = await runCli(['optout-check', rawUidFile, '-o', optOut, '-q'], { env: serveEnv(base) });
  expect(checked.code, checked.stderr).toBe(0);
  baselineOptout = readFileSync(optOut, 'utf8');
  // opted out by raw UID, and by email (the service then reports that identity's raw UID too)
  expect(table(baselineOptout).filter((r) => r.opted_out === 'true').length).toBe(
    OPTOUT_RAW_ROWS.length + OPTOUT_EMAILS.length,
  );

  const tokensOut = dir.file('baseline-tokens.csv');
  const generated = await runCli(['token', 'generate', '--input', tokenInput, '-o', tokensOut, '-q'], {
    env: serveEnv(base),
  });
  expect(generated.code, generated.stderr).toBe(0);
  baselineTokens = table(readFileSync(tokensOut, 'utf8'));

  baselineRemap = await remapScenario(base, 'baseline-remap', []);
  await retire(base);
}, 240_000);

afterAll(async () => {
  for (const s of [...serves]) await retire(s);
  dir.remove();
});

/**
 * The nightly job under faults: a state mapped on `s`, the service's clock moved 400 days (everything due), and
 * remap-due run until done. Returns the changes and the stored entries.
 */
async function remapScenario(
  s: ServeProcess,
  name: string,
  extra: string[],
): Promise<{ changes: string[]; entries: string[] }> {
  const { state } = await mapThrough(s, `${name}-map`);
  // identity time moves 400 days (every entry comes due); the envelope clock stays real, so --now says the night
  await advanceClock(s.url, 400);
  const env = serveEnv(s);
  const changes: string[] = [];
  let header = '';
  for (let run = 0; run < 6; run++) {
    const out = dir.file(`${name}-changes-${run}.csv`);
    const nowS = String(Math.floor((await clockOf(s.url)) / 1000));
    const res = await runCli(['remap-due', '--state', state, '--now', nowS, '-o', out, '-q', ...extra], { env });
    figures.runs++;
    expectNoStack(res);
    expect([0, 3], res.stderr).toContain(res.code);
    if (existsSync(out)) {
      const lines = readFileSync(out, 'utf8')
        .split('\n')
        .filter((l) => l !== '');
      header = lines[0] ?? header;
      changes.push(...lines.slice(1));
    }
    if (res.code === 0) {
      const report = inspectState(state);
      expect(report.integrity).toBe('ok');
      return { changes: [header, ...changes.sort()], entries: entriesText(report.entries) };
    }
    figures.exit3_runs++;
    expect(res.stderr).toMatch(/not remapped|re-run|retries them/i);
  }
  throw new Error(`remap-due not done after 6 runs (${name})`);
}

describe('map under faults: every run ends 0 or 3, re-runs complete it, the output equals the fault-free run', () => {
  const scenarios: [string, string[], string[]][] = [
    ['429 storm (--fault-429 0.5)', ['--fault-429', '0.5'], []],
    ['rate-limit bursts (--rate-limit 1500 items/s)', ['--rate-limit', '1500'], []],
    ['5xx (--fault-500 0.3)', ['--fault-500', '0.3'], []],
    ['dropped connections (--fault-drop 0.2)', ['--fault-drop', '0.2'], []],
    ['latency of 1.5 s on every answer', ['--latency-ms', '1500'], []],
    [
      'everything at once',
      ['--fault-429', '0.2', '--fault-500', '0.1', '--fault-drop', '0.1', '--latency-ms', '200'],
      [],
    ],
  ];
  for (const [name, faults, extra] of scenarios) {
    it(name, async () => {
      const s = await serve(faults);
      const { out } = await mapThrough(s, name.replace(/\W+/g, '-'), extra);
      const stats = await statsOf(s.url);
      await retire(s);
      expect(compareRows(baselineMap, out)).toBe(0);
      expect(out).toBe(baselineMap);
      if (faults.includes('--latency-ms'))
        figures.delayed_answers += Object.values(stats.requests).reduce((a, b) => a + b, 0);
      if (faults.length > 2 || !faults.includes('--latency-ms')) expect(faultCount(stats)).toBeGreaterThan(0);
    }, 300_000);
  }

  it('past the retry budget (--max-attempts 1 against 60% 500s): rows in error with a reason, exit 3; a re-run completes it', async () => {
    const port = await freePort();
    const failing = await serve(['--port', String(port), '--fault-500', '0.6']);
    const out = dir.file('budget.csv');
    const state = dir.file('budget.db');
    // not quiet: the advice to re-run is part of what is checked
    const first = await runCli(
      mapArgs(out, ['--state', state, '--max-attempts', '1']).filter((a) => a !== '-q'),
      { env: serveEnv(failing) },
    );
    figures.runs++;
    expectNoStack(first);
    expect(first.code, first.stderr).toBe(3);
    figures.exit3_runs++;
    expect(first.stderr).toMatch(/ended in error.*re-run the same command/);
    const rows = table(readFileSync(out, 'utf8'));
    const failed = rows.filter((r) => r.email_status === 'error' || r.phone_status === 'error');
    expect(failed.length).toBeGreaterThan(0);
    for (const r of failed) {
      if (r.email_status === 'error') expect(r.email_reason).toMatch(/500|Injected fault/);
      if (r.phone_status === 'error') expect(r.phone_reason).toMatch(/500|Injected fault/);
    }
    const report = inspectState(state);
    expect(report.integrity).toBe('ok');
    expect(report.halfWritten).toEqual([]);
    await retire(failing);
    // the same service, healthy again, on the same address (the state file is tied to it)
    const healthy = await serve(['--port', String(port)]);
    const before = (await statsOf(healthy.url)).items[MAP_PATH] ?? 0;
    const second = await runCli(mapArgs(out, ['--state', state]), { env: serveEnv(healthy) });
    figures.runs++;
    expect(second.code, second.stderr).toBe(0);
    // only what had failed is sent again: each distinct (type, hash) of a cell in error, once
    const sent = ((await statsOf(healthy.url)).items[MAP_PATH] ?? 0) - before;
    const retried = new Set<string>();
    for (const r of failed) {
      for (const [kind, value, status] of [
        ['email', r.email, r.email_status],
        ['phone', r.phone, r.phone_status],
      ] as const) {
        if (status !== 'error') continue;
        const prepared = prepareIdentifier(kind, value ?? '');
        if (prepared.ok) retried.add(`${prepared.type}:${prepared.hash}`);
      }
    }
    expect(sent).toBe(retried.size);
    await retire(healthy);
    const final = readFileSync(out, 'utf8');
    expect(compareRows(baselineMap, final)).toBe(0);
  }, 300_000);

  it('the service stops and comes back on the same port mid-run: the run (or a re-run) completes with the same output', async () => {
    const port = await freePort();
    let s = await serve(['--port', String(port), '--latency-ms', '100']);
    const out = dir.file('restart.csv');
    const state = dir.file('restart.db');
    const env = serveEnv(s);
    const running = runCli(mapArgs(out, ['--state', state, '--concurrency', '2']), { env });
    let done = false;
    void running.then(() => (done = true));
    const reached = await waitUntil(async () => done || ((await statsOf(s.url)).requests[MAP_PATH] ?? 0) >= 3, 60_000);
    expect(reached).toBe(true);
    expect(done).toBe(false);
    await retire(s);
    figures.restarts++;
    figures.faults_injected++;
    await sleep(1500);
    s = await serve(['--port', String(port), '--latency-ms', '100']);
    const first = await running;
    figures.runs++;
    expectNoStack(first);
    expect([0, 3], first.stderr).toContain(first.code);
    if (first.code === 3) {
      figures.exit3_runs++;
      await untilDone(mapArgs(out, ['--state', state]), env, {
        errorRows: () => table(readFileSync(out, 'utf8')),
        cells: mapCells,
      });
    }
    await retire(s);
    expect(compareRows(baselineMap, readFileSync(out, 'utf8'))).toBe(0);
    expect(inspectState(state).integrity).toBe('ok');
  }, 300_000);
});

describe('remap-due under faults: the changes and the state equal a fault-free night', () => {
  it('429s, 500s, drops and latency together', async () => {
    const s = await serve(['--fault-429', '0.3', '--fault-500', '0.1', '--fault-drop', '0.05', '--latency-ms', '50']);
    const got = await remapScenario(s, 'remap-faults', []);
    await retire(s);
    expect(got.changes.length).toBeGreaterThan(1);
    expect(compareRows(baselineRemap.changes.join('\n'), got.changes.join('\n'))).toBe(0);
    expect(got.changes).toEqual(baselineRemap.changes);
    expect(got.entries).toEqual(baselineRemap.entries);
  }, 300_000);
});

describe('optout-check under faults: the verdicts equal a fault-free run', () => {
  it('429s, 500s and drops on the opt-out endpoint (one request at a time)', async () => {
    const s = await serve(['--fault-429', '0.3', '--fault-500', '0.15', '--fault-drop', '0.1']);
    const out = dir.file('optout-faults.csv');
    await untilDone(['optout-check', rawUidFile, '-o', out, '-q'], serveEnv(s), {
      errorRows: () => table(readFileSync(out, 'utf8')),
      cells: (r) => [
        {
          status: r.opted_out === '' && !/not a raw UID/.test(r.reason ?? '') ? 'error' : 'checked',
          reason: r.reason ?? '',
        },
      ],
    });
    const stats = await statsOf(s.url);
    await retire(s);
    expect(faultCount(stats)).toBeGreaterThan(0);
    expect(compareRows(baselineOptout, readFileSync(out, 'utf8'))).toBe(0);
  }, 300_000);
});

describe('token commands under faults', () => {
  it('token generate --input: the same statuses as without faults, and every token validates (also under faults)', async () => {
    // one request per row: lighter faults than map's batches, or the backoff alone takes a minute
    const s = await serve(['--fault-429', '0.15', '--fault-500', '0.1', '--fault-drop', '0.05', '--latency-ms', '20']);
    const env = serveEnv(s);
    const out = dir.file('tokens-faults.csv');
    await untilDone(['token', 'generate', '--input', tokenInput, '-o', out, '-q'], env, {
      errorRows: () => table(readFileSync(out, 'utf8')),
      cells: (r) => [{ status: r.status ?? '', reason: r.reason ?? '' }],
    });
    const rows = table(readFileSync(out, 'utf8'));
    const shape = (r: Record<string, string>): string => `${r.identifier} ${r.identifier_type} ${r.status}`;
    expect(compareRows(baselineTokens.map(shape).join('\n'), rows.map(shape).join('\n'))).toBe(0);
    const validateInput = dir.file(
      'validate-input.csv',
      stringify([
        ['identifier', 'identifier_type', 'token'],
        ...rows
          .filter((r) => r.status === 'success')
          .map((r) => [r.identifier!, r.identifier_type!, r.advertising_token!]),
      ]),
    );
    const validated = dir.file('validated.csv');
    await untilDone(['token', 'validate', '--input', validateInput, '-o', validated, '-q'], env, {
      errorRows: () => table(readFileSync(validated, 'utf8')),
      cells: (r) => [{ status: r.valid ?? '', reason: r.reason ?? '' }],
    });
    const verdicts = table(readFileSync(validated, 'utf8')).map((r) => r.valid);
    expect(verdicts.length).toBe(rows.filter((r) => r.status === 'success').length);
    expect(new Set(verdicts)).toEqual(new Set(['true']));

    // token refresh --update under the same faults: retried, or refused cleanly and done on the next try
    const identity = rows.find((r) => r.status === 'success')!;
    const file = dir.file(
      'identity.json',
      JSON.stringify({
        advertising_token: identity.advertising_token,
        refresh_token: identity.refresh_token,
        identity_expires: Number(identity.identity_expires),
        refresh_from: Number(identity.refresh_from),
        refresh_expires: Number(identity.refresh_expires),
        refresh_response_key: identity.refresh_response_key,
      }),
    );
    let refreshed: CliResult | undefined;
    for (let i = 0; i < 5 && refreshed?.code !== 0; i++) {
      refreshed = await runCli(['token', 'refresh', '--in', file, '--update'], { env });
      figures.runs++;
      expectNoStack(refreshed);
      expect([0, 1], refreshed.stderr).toContain(refreshed.code);
      if (refreshed.code !== 0)
        expect(JSON.parse(readFileSync(file, 'utf8')).refresh_token).toBe(identity.refresh_token);
    }
    expect(refreshed?.code).toBe(0);
    const updated = JSON.parse(readFileSync(file, 'utf8')) as { advertising_token: string; refresh_token: string };
    expect(updated.refresh_token).not.toBe(identity.refresh_token);
    let check: CliResult | undefined;
    for (let i = 0; i < 5 && check?.code !== 0; i++) {
      check = await runCli(
        [
          'token',
          'validate',
          '--token',
          updated.advertising_token,
          `--${identity.identifier_type}`,
          identity.identifier!,
        ],
        { env },
      );
      figures.runs++;
      expectNoStack(check);
    }
    expect(check?.code, check?.stderr).toBe(0);
    expect(check?.stdout.trim()).toBe('true');
    await retire(s);
  }, 300_000);
});
