import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, startServe, type ServeProcess } from '../helpers/map-e2e-processes.js';
import { freePort, inspectState, requireBuilt, serveEnv, stackLines, tempDir } from './harness.js';
import { recordWhenPassed } from './results.js';

/**
 * A client whose clock is off by more than the service's window (±2 min, docs/wire-protocol.md §2.5) gets a clear
 * "clock skew" error and exit 1 from every command that sends request envelopes, not the service's generic 400
 * text. The skew is made on the service's side: `serve --now` five minutes off the real time, behind and ahead.
 * Inside the window (30 s off) everything works.
 */

const KEY = 'UID2-C-L-123-ClockTestKeyAAAAAAAAAAAAAAAAAA';
const SECRET = Buffer.alloc(32, 7).toString('base64');
const SEED = 'reliability-clock';
const dir = tempDir('clock');
const figures = { skewed_runs: 0, clear_clock_skew_errors: 0 };

let port: number;
let state: string;
let input: string;
let rawUids: string;
let newcomers: string;

function iso(offsetMs: number): string {
  return new Date(Date.now() + offsetMs).toISOString();
}

async function serveAt(offsetMs: number | null): Promise<ServeProcess> {
  return startServe([
    '--port',
    String(port),
    '--seed',
    SEED,
    '--api-key',
    KEY,
    '--client-secret',
    SECRET,
    ...(offsetMs === null ? [] : ['--now', iso(offsetMs)]),
  ]);
}

recordWhenPassed('clock_skew', () => figures);

beforeAll(async () => {
  requireBuilt();
  port = await freePort();
  input = dir.file(
    'people.csv',
    `email,phone\n${Array.from({ length: 30 }, (_, i) => `clock${i}@example.com,+1202555${String(1000 + i)}`).join('\n')}\n`,
  );
  newcomers = dir.file(
    'newcomers.csv',
    `email\n${Array.from({ length: 5 }, (_, i) => `late${i}@example.com`).join('\n')}\n`,
  );
  rawUids = dir.file('ids.csv', 'raw_uid\nG0TaKb5fG/eAAOiB/Zwkcs5Gvwgzo+T+Ya1U5Ql/NvU=\n');
  // a state made on a service with a good clock, on the port the skewed services will use
  state = join(dir.path, 'state.db');
  const good = await serveAt(null);
  try {
    const res = await runCli(
      [
        'map',
        input,
        '--email-col',
        'email',
        '--phone-col',
        'phone',
        '--state',
        state,
        '-o',
        dir.file('mapped.csv'),
        '-q',
      ],
      { env: serveEnv(good) },
    );
    expect(res.code, res.stderr).toBe(0);
  } finally {
    await good.stop();
  }
}, 60_000);

afterAll(() => {
  dir.remove();
});

const commands: [string, (out: string) => string[]][] = [
  ['map', (out) => ['map', input, '--email-col', 'email', '--phone-col', 'phone', '-o', out]],
  // identifiers the state does not hold yet: these need the service
  ['map --state', (out) => ['map', newcomers, '--state', state, '-o', out]],
  [
    'remap-due',
    (out) => ['remap-due', '--state', state, '--now', String(Math.floor(Date.now() / 1000) + 400 * 86_400), '-o', out],
  ],
  ['optout-check FILE', (out) => ['optout-check', rawUids, '-o', out]],
  ['optout-check --state', (out) => ['optout-check', '--state', state, '-o', out]],
  ['token generate', () => ['token', 'generate', '--email', 'clock0@example.com']],
  ['token validate', () => ['token', 'validate', '--token', 'AgAAAAN6', '--email', 'clock0@example.com']],
];

for (const [direction, offsetMs] of [
  ['behind (the service is 5 min ahead)', 5 * 60_000],
  ['ahead (the service is 5 min behind)', -5 * 60_000],
] as const) {
  describe(`client clock ${direction}`, () => {
    let serve: ServeProcess;
    beforeAll(async () => {
      serve = await serveAt(offsetMs);
    });
    afterAll(async () => {
      await serve?.stop();
    });

    for (const [name, args] of commands) {
      it(`${name}: one "clock skew" line, exit 1, no output written`, async () => {
        const out = join(dir.path, `${name.replace(/\W+/g, '-')}-${offsetMs}.csv`);
        const res = await runCli(args(out), { env: serveEnv(serve) });
        figures.skewed_runs++;
        expect(stackLines(res.stderr)).toEqual([]);
        expect(res.code, res.stderr).toBe(1);
        const errors = res.stderr.split('\n').filter((l) => /clock skew/i.test(l));
        expect(errors.length, res.stderr).toBeGreaterThanOrEqual(1);
        expect(errors.at(-1)).toMatch(/^uid2-batch: .*clock skew/i);
        // what to do about it, not only what the service said
        expect(res.stderr).toMatch(/clock|NTP/i);
        expect(res.stderr).not.toMatch(/^uid2-batch: (?!.*clock skew).*Invalid timestamp/m);
        figures.clear_clock_skew_errors++;
        if (name.startsWith('map')) expect(existsSync(out)).toBe(false);
      });
    }

    it('the state file is untouched by the refused runs', () => {
      const report = inspectState(state);
      expect(report.integrity).toBe('ok');
      expect([...report.entries.values()].every((e) => e.status === 1 && e.lastOptoutCheck === null)).toBe(true);
    });
  });
}

describe('inside the window', () => {
  it('a service 30 s off still answers: map exits 0', async () => {
    const serve = await serveAt(30_000);
    try {
      const res = await runCli(
        ['map', input, '--email-col', 'email', '--phone-col', 'phone', '-o', dir.file('ok.csv'), '-q'],
        { env: serveEnv(serve) },
      );
      expect(res.code, res.stderr).toBe(0);
    } finally {
      await serve.stop();
    }
  });
});
