import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, startServe, type CliResult, type ServeProcess } from '../helpers/map-e2e-processes.js';
import { startMalformedAnswerProxy, type MalformedAnswerProxy } from '../helpers/malformed-answer-proxy.js';
import {
  advanceClock,
  entriesText,
  inspectState,
  MAP_PATH,
  OPTOUT_PATH,
  optOut,
  requireBuilt,
  serveEnv,
  stackLines,
  tempDir,
} from './harness.js';
import { recordWhenPassed } from './results.js';

/**
 * Malformed answers: a proxy between the built CLI and `serve` opens each real answer, makes one item break the
 * wire contract, and seals it again, on every attempt. The run must end with exit 3 and `error` rows that say the
 * answer was malformed, store nothing of the poisoned batches, and a later honest run against the same service
 * must give the output (and state) of a run that never met the proxy.
 */

const V2_MAP_PATH = '/v2/identity/map';
const ROWS = 16;
const dir = tempDir('malformed-answers');
/** What the README's table says of this file: runs fed a malformed answer, and the re-runs compared afterwards. */
const figures = { malformed_runs: 0, outputs_compared: 0, rows_compared: 0, rows_lost: 0 };
recordWhenPassed('malformed_answers', () => figures);

/** The honest re-run's output, held to the undisturbed run's: counted for the table, then asserted. */
function expectUndisturbed(text: string, undisturbed: string): void {
  figures.outputs_compared++;
  figures.rows_compared += undisturbed.split('\n').length - 2;
  expect(text).toBe(undisturbed);
}
const serves: ServeProcess[] = [];
const proxies: MalformedAnswerProxy[] = [];

type Item = Record<string, unknown>;
type Shape = [name: string, alter: (item: Item) => unknown];

/** Every way item 2 lists for a v3 answer item to be malformed. */
const V3_SHAPES: Shape[] = [
  ['{}', () => ({})],
  ['null', () => null],
  ['a string', () => 'mapped'],
  ['u empty', (it) => ({ ...it, u: '' })],
  ['u numeric', (it) => ({ ...it, u: 12345 })],
  ['u not a raw UID', (it) => ({ ...it, u: `${String(it.u).slice(0, 20)}` })],
  ['p not a raw UID', (it) => ({ ...it, p: 'previous' })],
  ['r missing', ({ r: _r, ...rest }) => rest],
  ['r a string', (it) => ({ ...it, r: String(it.r) })],
  ['r negative', (it) => ({ ...it, r: -Number(it.r) })],
  ['r fractional', (it) => ({ ...it, r: Number(it.r) + 0.25 })],
  ['r absurd', (it) => ({ ...it, r: 1e300 })],
  ['e unknown', () => ({ e: 'unknown' })],
  ['u and e both', (it) => ({ ...it, e: 'optout' })],
];

/** Replaces the first mapped item of the first non-empty v3 array. */
function v3Alteration(alter: Shape[1]) {
  return (answer: Item): unknown => {
    const body = answer.body as Record<string, Item[]>;
    for (const kind of ['email', 'email_hash', 'phone', 'phone_hash']) {
      const items = body[kind] ?? [];
      const at = items.findIndex((it) => typeof it.u === 'string');
      if (at === -1) continue;
      const altered = [...items];
      altered[at] = alter(items[at] as Item) as Item;
      return { ...answer, body: { ...body, [kind]: altered } };
    }
    return undefined;
  };
}

function expectNoStack(run: CliResult): void {
  expect(stackLines(run.stderr), run.stderr).toEqual([]);
}

const rowsOf = (text: string): Record<string, string>[] => parse(text, { columns: true }) as Record<string, string>[];

async function serve(): Promise<ServeProcess> {
  const s = await startServe(['--seed', 'reliability-malformed-answers']);
  serves.push(s);
  return s;
}

async function proxyFor(s: ServeProcess): Promise<MalformedAnswerProxy> {
  const p = await startMalformedAnswerProxy(s.url, s.clientSecret);
  proxies.push(p);
  return p;
}

let inputFile: string;

beforeAll(() => {
  requireBuilt();
  const lines = ['id,email'];
  for (let i = 0; i < ROWS; i++) lines.push(`${i},person${i}@example.com`);
  lines.push(`${ROWS},not-an-email`);
  lines.push(`${ROWS + 1},optout@example.com`);
  inputFile = join(dir.path, 'in.csv');
  writeFileSync(inputFile, `${lines.join('\n')}\n`);
});

afterAll(async () => {
  await Promise.all(proxies.splice(0).map((p) => p.close()));
  await Promise.all(serves.splice(0).map((s) => s.stop()));
  dir.remove();
});

function mapArgs(out: string, state: string, extra: string[] = []): string[] {
  return ['map', inputFile, '--email-col', 'email', '--state', state, '-o', out, '-q', '--max-attempts', '2', ...extra];
}

/** Every row the service was asked about is `error`, for a malformed answer, naming no raw UID. */
function expectMalformedRows(out: string, path: string, baseline: Record<string, string>[]): void {
  const rows = rowsOf(readFileSync(out, 'utf8'));
  expect(rows).toHaveLength(baseline.length);
  rows.forEach((row, i) => {
    const honest = baseline[i] as Record<string, string>;
    if (honest.status === 'invalid') {
      expect(row.status).toBe('invalid');
      return;
    }
    expect(row.status, JSON.stringify(row)).toBe('error');
    expect(row.raw_uid).toBe('');
    expect(row.reason).toMatch(
      new RegExp(`malformed answer from http://127\\.0\\.0\\.1:\\d+${path}: .* after 2 attempts`),
    );
    for (const other of baseline) if (other.raw_uid) expect(row.reason).not.toContain(other.raw_uid);
  });
}

describe('map (v3) against answers with one malformed item', () => {
  let service: ServeProcess;
  let proxy: MalformedAnswerProxy;
  let baseline: string;
  let baselineEntries: string[];

  beforeAll(async () => {
    service = await serve();
    proxy = await proxyFor(service);
    const out = join(dir.path, 'map-baseline.csv');
    const state = join(dir.path, 'map-baseline.db');
    const run = await runCli(mapArgs(out, state), { env: serveEnv(service) });
    expect(run.code, run.stderr).toBe(0);
    baseline = readFileSync(out, 'utf8');
    baselineEntries = entriesText(inspectState(state).entries);
    expect(rowsOf(baseline).filter((r) => r.status === 'mapped')).toHaveLength(ROWS);
  });

  it.each(V3_SHAPES)(
    '%s: exit 3, error rows, nothing stored; an honest re-run gives the undisturbed output',
    async (name, alter) => {
      const slug = name.replace(/\W+/g, '-');
      const out = join(dir.path, `map-${slug}.csv`);
      const state = join(dir.path, `map-${slug}.db`);
      proxy.alter(MAP_PATH, v3Alteration(alter));
      const before = proxy.altered();
      const poisoned = await runCli(mapArgs(out, state), { env: serveEnv({ ...service, url: proxy.url }) });
      proxy.alter(MAP_PATH, undefined);
      expect(proxy.altered() - before).toBe(2);
      figures.malformed_runs++;
      expect(poisoned.code, poisoned.stderr).toBe(3);
      expectNoStack(poisoned);
      expectMalformedRows(out, MAP_PATH, rowsOf(baseline));
      const stored = inspectState(state);
      expect(stored.entries.size).toBe(0);
      expect(stored.integrity).toBe('ok');

      const honest = await runCli(mapArgs(out, state), { env: serveEnv(service) });
      expect(honest.code, honest.stderr).toBe(0);
      expectUndisturbed(readFileSync(out, 'utf8'), baseline);
      expect(entriesText(inspectState(state).entries)).toEqual(baselineEntries);
    },
  );
});

describe('map (v3) with one batch of several malformed', () => {
  it('only that batch is error and unstored; the others are as undisturbed, and a re-run completes it', async () => {
    const service = await serve();
    const proxy = await proxyFor(service);
    const batches = ['--batch-size', '4'];
    const baselineOut = join(dir.path, 'batches-baseline.csv');
    const baselineState = join(dir.path, 'batches-baseline.db');
    const first = await runCli(mapArgs(baselineOut, baselineState, batches), { env: serveEnv(service) });
    expect(first.code, first.stderr).toBe(0);
    const baseline = rowsOf(readFileSync(baselineOut, 'utf8'));
    const baselineEntries = entriesText(inspectState(baselineState).entries);

    // the batch that leads with the first hash seen is malformed on every attempt; every other batch is honest
    let poisonedLead: unknown;
    proxy.alter(MAP_PATH, (answer, request) => {
      const lead = (request.email_hash as unknown[] | undefined)?.[0];
      poisonedLead ??= lead;
      return lead === poisonedLead ? v3Alteration(() => ({ e: 'unknown' }))(answer) : undefined;
    });
    const out = join(dir.path, 'batches.csv');
    const state = join(dir.path, 'batches.db');
    const poisoned = await runCli(mapArgs(out, state, batches), { env: serveEnv({ ...service, url: proxy.url }) });
    proxy.alter(MAP_PATH, undefined);
    figures.malformed_runs++;
    expect(poisoned.code, poisoned.stderr).toBe(3);
    const rows = rowsOf(readFileSync(out, 'utf8'));
    const failed = rows.filter((r) => r.status === 'error');
    expect(failed.length).toBeGreaterThan(0);
    expect(failed.length).toBeLessThanOrEqual(4);
    rows.forEach((row, i) => {
      if (row.status !== 'error') expect(row).toEqual(baseline[i]);
      else expect(row.reason).toMatch(/malformed answer from .*: email_hash item \d+ has an "e" other than/);
    });
    const stored = entriesText(inspectState(state).entries);
    expect(stored).toHaveLength(baselineEntries.length - failed.length);
    for (const entry of stored) expect(baselineEntries).toContain(entry);

    const honest = await runCli(mapArgs(out, state, batches), { env: serveEnv(service) });
    expect(honest.code, honest.stderr).toBe(0);
    expectUndisturbed(readFileSync(out, 'utf8'), readFileSync(baselineOut, 'utf8'));
    expect(entriesText(inspectState(state).entries)).toEqual(baselineEntries);
  });
});

const V2_SHAPES: [string, (body: { mapped: Item[]; unmapped?: Item[] }) => unknown][] = [
  ['a null mapped item', (b) => ({ ...b, mapped: [null, ...b.mapped.slice(1)] })],
  [
    'an advertising_id that is not a raw UID',
    (b) => ({ ...b, mapped: [{ ...b.mapped[0], advertising_id: 'x' }, ...b.mapped.slice(1)] }),
  ],
  ['an empty bucket_id', (b) => ({ ...b, mapped: [{ ...b.mapped[0], bucket_id: '' }, ...b.mapped.slice(1)] })],
  ['an unknown reason', (b) => ({ ...b, unmapped: (b.unmapped ?? []).map((u) => ({ ...u, reason: 'gone' })) })],
  ['an identifier not sent', (b) => ({ ...b, mapped: [{ ...b.mapped[0], identifier: 'x' }, ...b.mapped.slice(1)] })],
  ['a mapped item missing', (b) => ({ ...b, mapped: b.mapped.slice(1) })],
];

describe('map --api v2 against answers with one malformed item', () => {
  let service: ServeProcess;
  let proxy: MalformedAnswerProxy;
  let baseline: string;
  let baselineEntries: string[];
  const v2Args = (out: string, state: string) => mapArgs(out, state, ['--api', 'v2']);

  beforeAll(async () => {
    service = await serve();
    proxy = await proxyFor(service);
    const out = join(dir.path, 'v2-baseline.csv');
    const state = join(dir.path, 'v2-baseline.db');
    const run = await runCli(v2Args(out, state), { env: serveEnv(service) });
    expect(run.code, run.stderr).toBe(0);
    baseline = readFileSync(out, 'utf8');
    baselineEntries = entriesText(inspectState(state).entries);
  });

  it.each(V2_SHAPES)(
    '%s: exit 3, error rows, nothing stored; an honest re-run gives the undisturbed output',
    async (name, alter) => {
      const slug = name.replace(/\W+/g, '-');
      const out = join(dir.path, `v2-${slug}.csv`);
      const state = join(dir.path, `v2-${slug}.db`);
      proxy.alter(V2_MAP_PATH, (answer) => ({ ...answer, body: alter(answer.body as { mapped: Item[] }) }));
      const poisoned = await runCli(v2Args(out, state), { env: serveEnv({ ...service, url: proxy.url }) });
      proxy.alter(V2_MAP_PATH, undefined);
      figures.malformed_runs++;
      expect(poisoned.code, poisoned.stderr).toBe(3);
      expectNoStack(poisoned);
      expectMalformedRows(out, V2_MAP_PATH, rowsOf(baseline));
      expect(inspectState(state).entries.size).toBe(0);

      const honest = await runCli(v2Args(out, state), { env: serveEnv(service) });
      expect(honest.code, honest.stderr).toBe(0);
      expectUndisturbed(readFileSync(out, 'utf8'), baseline);
      expect(entriesText(inspectState(state).entries)).toEqual(baselineEntries);
    },
  );
});

/** The shapes that once stored wrong data in a remap: tombstones from an unknown e, empty raw UIDs, endless r. */
const REMAP_SHAPES = V3_SHAPES.filter(([name]) => ['{}', 'null', 'u empty', 'r absurd', 'e unknown'].includes(name));

describe('remap-due against answers with one malformed item', () => {
  let service: ServeProcess;
  let proxy: MalformedAnswerProxy;
  let mapped: string;
  let mappedEntries: string[];
  let nowS: number;
  let baselineChanges: string;
  let baselineEntries: string[];
  const remapArgs = (state: string, out: string) => [
    'remap-due',
    '--state',
    state,
    '-o',
    out,
    '--now',
    String(nowS),
    '-q',
    '--max-attempts',
    '2',
  ];

  beforeAll(async () => {
    service = await serve();
    proxy = await proxyFor(service);
    mapped = join(dir.path, 'remap-mapped.db');
    const run = await runCli(mapArgs(join(dir.path, 'remap-map.csv'), mapped), { env: serveEnv(service) });
    expect(run.code, run.stderr).toBe(0);
    mappedEntries = entriesText(inspectState(mapped).entries);
    nowS = Math.floor((await advanceClock(service.url, 40)) / 1000);
    const state = join(dir.path, 'remap-baseline.db');
    copyFileSync(mapped, state);
    const out = join(dir.path, 'remap-baseline.csv');
    const remap = await runCli(remapArgs(state, out), { env: serveEnv(service) });
    expect(remap.code, remap.stderr).toBe(0);
    baselineChanges = readFileSync(out, 'utf8');
    baselineEntries = entriesText(inspectState(state).entries);
    expect(baselineEntries).not.toEqual(mappedEntries);
  });

  it.each(REMAP_SHAPES)(
    '%s: exit 3, the state untouched; an honest re-run gives the undisturbed changes and state',
    async (name, alter) => {
      const slug = name.replace(/\W+/g, '-');
      const state = join(dir.path, `remap-${slug}.db`);
      const out = join(dir.path, `remap-${slug}.csv`);
      copyFileSync(mapped, state);
      proxy.alter(MAP_PATH, v3Alteration(alter));
      const poisoned = await runCli(remapArgs(state, out), { env: serveEnv({ ...service, url: proxy.url }) });
      proxy.alter(MAP_PATH, undefined);
      figures.malformed_runs++;
      expect(poisoned.code, poisoned.stderr).toBe(3);
      expectNoStack(poisoned);
      expect(entriesText(inspectState(state).entries)).toEqual(mappedEntries);

      const honest = await runCli(remapArgs(state, out), { env: serveEnv(service) });
      expect(honest.code, honest.stderr).toBe(0);
      expectUndisturbed(readFileSync(out, 'utf8'), baselineChanges);
      expect(entriesText(inspectState(state).entries)).toEqual(baselineEntries);
    },
  );
});

const OPTOUT_SHAPES: Shape[] = [
  ['null', () => null],
  ['an advertising_id not sent', (it) => ({ ...it, advertising_id: `${'A'.repeat(43)}=` })],
  ['a numeric advertising_id', (it) => ({ ...it, advertising_id: 7 })],
  ['opted_out_since missing', ({ opted_out_since: _s, ...rest }) => rest],
  ['opted_out_since a string', (it) => ({ ...it, opted_out_since: String(it.opted_out_since) })],
  ['opted_out_since negative', (it) => ({ ...it, opted_out_since: -1 })],
  ['opted_out_since fractional', (it) => ({ ...it, opted_out_since: Number(it.opted_out_since) + 0.5 })],
  ['opted_out_since absurd', (it) => ({ ...it, opted_out_since: 1e300 })],
];

describe('optout-check against answers with one malformed item', () => {
  let service: ServeProcess;
  let proxy: MalformedAnswerProxy;
  let input: string;
  let baseline: string;
  const checkArgs = (out: string) => ['optout-check', input, '-o', out, '-q', '--max-attempts', '2'];

  beforeAll(async () => {
    service = await serve();
    proxy = await proxyFor(service);
    const mappedOut = join(dir.path, 'optout-map.csv');
    const run = await runCli(mapArgs(mappedOut, join(dir.path, 'optout-map.db')), { env: serveEnv(service) });
    expect(run.code, run.stderr).toBe(0);
    const rawUids = rowsOf(readFileSync(mappedOut, 'utf8'))
      .map((r) => r.raw_uid as string)
      .filter((u) => u !== '');
    for (const u of rawUids.slice(0, 3))
      await optOut(service.url, { advertising_id: u, since_ms: Date.UTC(2026, 0, 15) });
    input = join(dir.path, 'optout-in.csv');
    writeFileSync(input, `raw_uid\n${rawUids.join('\n')}\n`);
    const out = join(dir.path, 'optout-baseline.csv');
    const check = await runCli(checkArgs(out), { env: serveEnv(service) });
    expect(check.code, check.stderr).toBe(0);
    baseline = readFileSync(out, 'utf8');
    expect(rowsOf(baseline).filter((r) => r.opted_out === 'true')).toHaveLength(3);
  });

  it.each(OPTOUT_SHAPES)(
    '%s: exit 3, error rows; an honest re-run gives the undisturbed output',
    async (name, alter) => {
      const out = join(dir.path, `optout-${name.replace(/\W+/g, '-')}.csv`);
      proxy.alter(OPTOUT_PATH, (answer) => {
        const body = answer.body as { opted_out: Item[] };
        return { ...answer, body: { opted_out: [alter(body.opted_out[0] as Item), ...body.opted_out.slice(1)] } };
      });
      const poisoned = await runCli(checkArgs(out), { env: serveEnv({ ...service, url: proxy.url }) });
      proxy.alter(OPTOUT_PATH, undefined);
      figures.malformed_runs++;
      expect(poisoned.code, poisoned.stderr).toBe(3);
      expectNoStack(poisoned);
      for (const row of rowsOf(readFileSync(out, 'utf8'))) {
        expect(row.opted_out).not.toBe('true');
        expect(row.reason).toMatch(/malformed answer from http:\/\/127\.0\.0\.1:\d+\/v2\/optout\/status: /);
      }

      const honest = await runCli(checkArgs(out), { env: serveEnv(service) });
      expect(honest.code, honest.stderr).toBe(0);
      expectUndisturbed(readFileSync(out, 'utf8'), baseline);
    },
  );
});

describe('optout-check --state against answers with one malformed item', () => {
  let service: ServeProcess;
  let proxy: MalformedAnswerProxy;
  let mapped: string;
  let mappedEntries: string[];
  let baseline: string;
  let baselineEntries: string[];
  const sweepArgs = (state: string, out: string) => [
    'optout-check',
    '--state',
    state,
    '-o',
    out,
    '-q',
    '--max-attempts',
    '2',
  ];
  const SHAPES = OPTOUT_SHAPES.filter(([name]) =>
    ['an advertising_id not sent', 'opted_out_since missing', 'opted_out_since absurd'].includes(name),
  );

  beforeAll(async () => {
    service = await serve();
    proxy = await proxyFor(service);
    mapped = join(dir.path, 'sweep-mapped.db');
    const mappedOut = join(dir.path, 'sweep-map.csv');
    const run = await runCli(mapArgs(mappedOut, mapped), { env: serveEnv(service) });
    expect(run.code, run.stderr).toBe(0);
    mappedEntries = entriesText(inspectState(mapped).entries, true);
    const rawUids = rowsOf(readFileSync(mappedOut, 'utf8'))
      .map((r) => r.raw_uid as string)
      .filter((u) => u !== '');
    for (const u of rawUids.slice(0, 3))
      await optOut(service.url, { advertising_id: u, since_ms: Date.UTC(2026, 0, 15) });
    const state = join(dir.path, 'sweep-baseline.db');
    copyFileSync(mapped, state);
    const out = join(dir.path, 'sweep-baseline.csv');
    const sweep = await runCli(sweepArgs(state, out), { env: serveEnv(service) });
    expect(sweep.code, sweep.stderr).toBe(0);
    baseline = readFileSync(out, 'utf8');
    baselineEntries = entriesText(inspectState(state).entries, true);
    expect(baselineEntries).not.toEqual(mappedEntries);
  });

  it.each(SHAPES)(
    '%s: exit 3, no tombstone and no check recorded; an honest re-run gives the undisturbed sweep',
    async (name, alter) => {
      const slug = name.replace(/\W+/g, '-');
      const state = join(dir.path, `sweep-${slug}.db`);
      const out = join(dir.path, `sweep-${slug}.csv`);
      copyFileSync(mapped, state);
      proxy.alter(OPTOUT_PATH, (answer) => {
        const body = answer.body as { opted_out: Item[] };
        return { ...answer, body: { opted_out: [alter(body.opted_out[0] as Item), ...body.opted_out.slice(1)] } };
      });
      const poisoned = await runCli(sweepArgs(state, out), { env: serveEnv({ ...service, url: proxy.url }) });
      proxy.alter(OPTOUT_PATH, undefined);
      figures.malformed_runs++;
      expect(poisoned.code, poisoned.stderr).toBe(3);
      expectNoStack(poisoned);
      expect(entriesText(inspectState(state).entries, true)).toEqual(mappedEntries);

      const honest = await runCli(sweepArgs(state, out), { env: serveEnv(service) });
      expect(honest.code, honest.stderr).toBe(0);
      expectUndisturbed(readFileSync(out, 'utf8'), baseline);
      expect(entriesText(inspectState(state).entries, true)).toEqual(baselineEntries);
    },
  );
});
