import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, ROOT } from '../helpers/map-e2e-build.js';
import { tempDir } from '../helpers/map-e2e-data.js';
import { runCli } from '../helpers/map-e2e-processes.js';

// --log-format json: every line on stderr is one JSON object (time, level, command, message, figures), stdout
// stays the data, and a bad value is one line naming the allowed values.

const dir = tempDir('log-format-json');
const SAMPLE = join(ROOT, 'samples', 'customers.csv');
const LEVELS = new Set(['debug', 'info', 'warn', 'error']);

beforeAll(() => ensureBuilt(), 120_000);
afterAll(() => dir.remove());

type Entry = Record<string, unknown> & { time: string; level: string; command: string; message: string };

/** Every stderr line as a log entry; fails the test on any line that is not one. */
function entriesOf(stderr: string, command: string): Entry[] {
  expect(stderr.endsWith('\n'), stderr).toBe(true);
  return stderr
    .slice(0, -1)
    .split('\n')
    .map((line) => {
      const entry = JSON.parse(line) as Entry;
      expect(Object.keys(entry).slice(0, 4), line).toEqual(['time', 'level', 'command', 'message']);
      expect(entry.time, line).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(Math.abs(Date.parse(entry.time) - Date.now()), line).toBeLessThan(600_000);
      expect(LEVELS.has(entry.level), line).toBe(true);
      expect(entry.command, line).toBe(command);
      expect(typeof entry.message, line).toBe('string');
      expect(entry.message, line).not.toMatch(/^uid2-batch: /);
      expect(entry.message.includes(String.fromCharCode(27)), line).toBe(false);
      return entry;
    });
}

describe('--log-format json', () => {
  it('a map run: JSON lines with the summary counts, the exit code last, stdout the same data as in text', async () => {
    const s = join(dir.path, 'ok.json');
    const json = await runCli(['map', SAMPLE, '--env', 'local', '--log-format', 'json', '--summary-json', s]);
    const text = await runCli(['map', SAMPLE, '--env', 'local']);
    expect(json.code, json.stderr).toBe(0);
    expect(json.stdout).toBe(text.stdout);
    const entries = entriesOf(json.stderr, 'map');
    expect(entries.length).toBe(text.stderr.trim().split('\n').length + 1);
    const summary = JSON.parse(readFileSync(s, 'utf8')) as Record<string, unknown>;
    const { outcome: _o, exit_code: _e, ...made } = summary;
    const summaryEntry = entries.find((e) => e.counts !== undefined);
    expect(summaryEntry).toMatchObject({ level: 'info', counts: made });
    // the same line as in text, but for the run's time
    const untimed = (line: string | undefined) => line?.replace(/ in [\d.]+ s \([\d,.]+ rows\/s\)/, '');
    const textLine = text.stderr.split('\n').find((l) => l.startsWith('map: 3,000 rows'));
    expect(untimed(summaryEntry?.message)).toBe(untimed(textLine));
    expect(untimed(textLine)).toContain('4,657 mapped');
    expect(entries.at(-1)).toMatchObject({ level: 'info', message: 'finished with exit code 0', exit_code: 0 });
  });

  it('a warning is level warn, without its lead', async () => {
    const r = await runCli([
      'map',
      SAMPLE,
      '--env',
      'local',
      '--api',
      'v2',
      '--log-format',
      'json',
      '-o',
      join(dir.path, 'v2.csv'),
    ]);
    expect(r.code, r.stderr).toBe(0);
    const warnings = entriesOf(r.stderr, 'map').filter((e) => e.level === 'warn');
    expect(warnings.length).toBe(1);
    expect(warnings[0]?.message).toMatch(/^map --api v2 \(POST \/v2\/identity\/map\) is the v2 API/);
  });

  it('a failed run (UID2_BATCH_LOG_FORMAT=json): the error line as JSON with its exit code', async () => {
    const r = await runCli(['map', join(dir.path, 'no-such.csv'), '--env', 'local'], {
      env: { UID2_BATCH_LOG_FORMAT: 'json' },
    });
    expect(r.code).not.toBe(0);
    const entries = entriesOf(r.stderr, 'map');
    expect(entries[0]).toMatchObject({ level: 'error', exit_code: r.code });
    expect(entries[0]?.message).toContain('no-such.csv');
    expect(entries.at(-1)).toMatchObject({ level: 'error', exit_code: r.code });
  });

  it("commander's usage error, after the command: exit 2 as JSON", async () => {
    const r = await runCli(['remap-due', '--state', join(dir.path, 's.db'), '--bogus', '--log-format', 'json']);
    expect(r.code).toBe(2);
    const entries = entriesOf(r.stderr, 'remap-due');
    expect(entries[0]).toMatchObject({ level: 'error', message: "unknown option '--bogus'", exit_code: 2 });
  });

  it('a bad value: one line with the allowed values, exit 2', async () => {
    const flag = await runCli(['map', SAMPLE, '--env', 'local', '--log-format', 'xml']);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toBe("uid2-batch: --log-format must be text or json (got 'xml')\n");
    expect(flag.stdout).toBe('');
    const env = await runCli(['map', SAMPLE, '--env', 'local'], { env: { UID2_BATCH_LOG_FORMAT: 'yaml' } });
    expect(env.code).toBe(2);
    expect(env.stderr).toBe("uid2-batch: UID2_BATCH_LOG_FORMAT must be text or json (got 'yaml')\n");
  });
});

describe('--log-format json with --quiet', () => {
  it('a run that succeeded writes nothing at all; one that failed still says its error and exit code', async () => {
    const ok = await runCli([
      'map',
      SAMPLE,
      '--env',
      'local',
      '-q',
      '--log-format',
      'json',
      '-o',
      join(dir.path, 'q.csv'),
    ]);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stderr).toBe('');
    const failed = await runCli(['map', join(dir.path, 'no-such.csv'), '--env', 'local', '-q', '--log-format=json']);
    expect(failed.code).not.toBe(0);
    expect(entriesOf(failed.stderr, 'map').map((e) => e.exit_code)).toEqual([failed.code, failed.code]);
  });
});

describe('--log-format json without a command', () => {
  it('--version prints the version on stdout and nothing on stderr; a bad root flag is an entry of the program', async () => {
    const version = await runCli(['--log-format', 'json', '--version']);
    expect(version.code).toBe(0);
    expect(version.stdout).toMatch(/^\d+\.\d+\.\d+\n$/);
    expect(version.stderr).toBe('');
    const bad = await runCli(['--log-format', 'json', '--bogus']);
    expect(bad.code).toBe(2);
    expect(entriesOf(bad.stderr, 'uid2-batch')[0]).toMatchObject({
      level: 'error',
      message: "unknown option '--bogus'",
      exit_code: 2,
    });
  });
});
