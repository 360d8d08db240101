// Regressions: bugs the reliability suite found (mixed line ends, an --encoding hint with no such option, change
// rows lost after a kill or an interrupted re-run into the same file, opt-outs reported by no output, a secret
// accepted as a flag value). Each test failed before its fix; titles say what went wrong.
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, startServe, type ServeProcess } from '../helpers/map-e2e-processes.js';
import { advanceClock, inspectState, MAP_PATH, OPTOUT_PATH, optOut, runAndKill, serveEnv, tempDir } from './harness.js';

const sha256 = (s: string): string => createHash('sha256').update(s, 'utf8').digest('base64');
const rows = (text: string): Record<string, string>[] => parse(text, { columns: true }) as Record<string, string>[];
const dir = tempDir('known-bugs');
afterAll(() => dir.remove());

describe('bug 1: mixed line endings', () => {
  it('LF header, then CRLF rows: the CR is hashed into the email (hash and map say ok/mapped, wrong raw UID)', async () => {
    const input = dir.file('lf-then-crlf.csv', 'id,email\n1,a@example.com\r\n2,b@example.com\n');
    const res = await runCli(['hash', input, '-o', dir.file('h1.csv'), '-q']);
    expect(res.code).toBe(0);
    const out = rows(readFileSync(dir.file('h1.csv'), 'utf8'));
    expect(out[0]!.hash).toBe(sha256('a@example.com'));
  });
  it('CRLF header, then an LF row: two input rows become one output row (a row vanishes, exit 0)', async () => {
    const input = dir.file('crlf-then-lf.csv', 'id,email\r\n1,a@example.com\n2,b@example.com\r\n3,c@example.com\r\n');
    const res = await runCli(['map', input, '--env', 'local', '-o', dir.file('m1.csv'), '-q']);
    expect(res.code).toBe(0);
    expect(rows(readFileSync(dir.file('m1.csv'), 'utf8')).map((r) => r.id)).toEqual(['1', '2', '3']);
  });
});

describe('bug 2: the invalid-UTF-8 hint names an option map and optout-check do not have', () => {
  const input = join(import.meta.dirname, '..', '..', 'test', 'fixtures', 'bad-input', 'latin1.csv');
  for (const command of [
    ['map', input, '--env', 'local'],
    ['optout-check', input, '--env', 'local', '--col', 'email'],
  ]) {
    it(`${command[0]}: following the hint "--encoding latin1" works`, async () => {
      const first = await runCli([...command, '-q']);
      expect(first.stderr).toContain('--encoding latin1');
      const again = await runCli([
        ...command,
        '--encoding',
        'latin1',
        '-q',
        '-o',
        dir.file(`${command[0]}-latin1.csv`),
      ]);
      expect(again.stderr).not.toMatch(/unknown option/);
      expect(again.code).not.toBe(2);
    });
  }
});

describe('bugs 4 and 5: remap-due loses changes', () => {
  let serve: ServeProcess;
  let template: string;
  let nowS: number;
  beforeAll(async () => {
    serve = await startServe(['--seed', 'known-bugs', '--latency-ms', '60']);
    const lines = ['email'];
    for (let i = 0; i < 20_000; i++) lines.push(`kb.${i}@example.com`);
    const input = dir.file('in.csv', `${lines.join('\n')}\n`);
    template = dir.file('t.db');
    const res = await runCli(['map', input, '--state', template, '-o', dir.file('m.csv'), '-q'], {
      env: serveEnv(serve),
    });
    expect(res.code).toBe(0);
    nowS = Math.floor((await advanceClock(serve.url, 400)) / 1000);
  });
  afterAll(() => serve?.stop());

  it('4: after a SIGKILL, the changes of the batches it committed are reported by no run', async () => {
    const state = dir.file('k.db');
    copyFileSync(template, state);
    const args = (out: string) => [
      'remap-due',
      '--state',
      state,
      '--now',
      String(nowS),
      '--concurrency',
      '1',
      '-o',
      out,
      '-q',
    ];
    const killed = await runAndKill(args(dir.file('c1.csv')), serveEnv(serve), serve.url, MAP_PATH, {
      signal: 'SIGKILL',
      afterRequests: 2,
      delayMs: 40,
    });
    expect(killed.killed).toBe(true);
    const committed = [...inspectState(state).entries.values()].filter((e) => e.r !== null && e.r > nowS).length;
    expect(committed).toBeGreaterThan(0);
    const again = await runCli(args(dir.file('c2.csv')), { env: serveEnv(serve) });
    expect(again.code).toBe(0);
    const reported = [dir.file('c1.csv'), dir.file('c2.csv')]
      .filter(existsSync)
      .flatMap((f) => rows(readFileSync(f, 'utf8')));
    // every entry rotated after 400 days: each one must be in some changes file
    expect(reported.length).toBe(20_000);
  });

  it("5: an interrupted run and its re-run with the same -o FILE (the cron line): the file ends with only the re-run's changes", async () => {
    const state = dir.file('i.db');
    copyFileSync(template, state);
    const out = dir.file('same.csv');
    const args = ['remap-due', '--state', state, '--now', String(nowS), '--concurrency', '1', '-o', out, '-q'];
    const interrupted = await runAndKill(args, serveEnv(serve), serve.url, MAP_PATH, {
      signal: 'SIGINT',
      afterRequests: 2,
      delayMs: 0,
    });
    expect(interrupted.code).toBe(130);
    const again = await runCli(args, { env: serveEnv(serve) });
    expect(again.code).toBe(0);
    expect(rows(readFileSync(out, 'utf8')).length).toBe(20_000);
  });
});

describe('bug 6: optout-check --state killed by SIGKILL', () => {
  it('the opt-outs its committed batches found are tombstoned in the state but reported in no output', async () => {
    const serve = await startServe(['--seed', 'known-bugs-6', '--latency-ms', '150']);
    try {
      const lines = ['email'];
      for (let i = 0; i < 15_000; i++) lines.push(`kb6.${i}@example.com`);
      const state = dir.file('s6.db');
      const res = await runCli(
        ['map', dir.file('in6.csv', `${lines.join('\n')}\n`), '--state', state, '-o', dir.file('m6.csv'), '-q'],
        { env: serveEnv(serve) },
      );
      expect(res.code).toBe(0);
      for (let i = 0; i < 15_000; i += 100) await optOut(serve.url, { email: `kb6.${i}@example.com` });
      const args = (out: string) => ['optout-check', '--state', state, '-o', out, '-q'];
      const killed = await runAndKill(args(dir.file('o1.csv')), serveEnv(serve), serve.url, OPTOUT_PATH, {
        signal: 'SIGKILL',
        afterRequests: 2,
        delayMs: 100,
      });
      expect(killed.killed).toBe(true);
      const again = await runCli(args(dir.file('o2.csv')), { env: serveEnv(serve) });
      expect(again.code).toBe(0);
      const reported = new Set(
        [dir.file('o1.csv'), dir.file('o2.csv')]
          .filter(existsSync)
          .flatMap((f) => rows(readFileSync(f, 'utf8')))
          .filter((r) => r.opted_out === 'true')
          .map((r) => r.hash),
      );
      expect(reported.size).toBe(150);
    } finally {
      await serve.stop();
    }
  });
});

describe('bug 7: a refresh_response_key as a flag value', () => {
  it('token refresh --refresh-response-key VALUE is refused, naming --refresh-response-key-file', async () => {
    const value = Buffer.alloc(32, 3).toString('base64');
    const res = await runCli([
      'token',
      'refresh',
      '--refresh-token-file',
      dir.file('none'),
      '--refresh-response-key',
      value,
      '--env',
      'local',
    ]);
    expect(res.code).toBe(2);
    expect(res.stderr).toContain('--refresh-response-key-file');
    expect(res.stderr).not.toContain(value);
  });
});
