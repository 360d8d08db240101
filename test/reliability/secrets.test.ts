import { randomBytes } from 'node:crypto';
import { lockPathOf } from '../../src/state/lock.js';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, startServe, type CliResult, type ServeProcess } from '../helpers/map-e2e-processes.js';
import { advanceClock, clockOf, requireBuilt, serveEnv, stackLines, tempDir } from './harness.js';
import { recordWhenPassed } from './results.js';

/**
 * Secrets and personal data. map, remap-due, optout-check and the token commands run with a known API key and
 * client secret, on inputs of distinctive raw emails and phones, through successes, row errors (injected 500s),
 * refused credentials and a refused refresh; then every stderr line, every summary (stderr and --summary-json)
 * and every byte of the state file and its -wal/-shm are searched for the key, the secret, each
 * refresh_response_key seen, and each raw email and phone of the inputs. None may be there. The state file is
 * 0600; a secret given as a flag value is refused, naming the variable or file option to use; a plain http://
 * base URL to another machine is refused without --insecure-http.
 */

const API_KEY = `UID2-C-L-777-Canary${randomBytes(12).toString('base64url')}`;
const CLIENT_SECRET = randomBytes(32).toString('base64');
const WRONG_KEY = `UID2-C-L-777-Wrong${randomBytes(12).toString('base64url')}`;
const WRONG_SECRET = randomBytes(32).toString('base64');

const dir = tempDir('secrets');
let serve: ServeProcess;
let flaky: ServeProcess;

/** Everything a user or a log collector sees of the runs, by where it came from. */
const seen: { where: string; text: string }[] = [];
/** Secrets and personal values that must be in none of it. */
const needles = new Set<string>([API_KEY, CLIENT_SECRET, WRONG_KEY, WRONG_SECRET]);
const figures = { commands_run: 0, texts_searched: 0, bytes_searched: 0, needles: 0, leaks: 0 };

const EMAILS = Array.from({ length: 60 }, (_, i) => `Canary.Person${i}+tag@Leak-Check.example`);
const PHONES = Array.from({ length: 60 }, (_, i) => `+1999555${String(1000 + i)}`);
const INVALID_PII = [
  'canary-no-at-sign.leak-check.example',
  'canary@@leak-check.example',
  '+1 999 555 7777',
  '999-555-7778',
];

async function cli(args: string[], options: { env?: Record<string, string>; input?: string } = {}): Promise<CliResult> {
  const res = await runCli(args, options);
  figures.commands_run++;
  seen.push({ where: `stderr of ${args.slice(0, 2).join(' ')}`, text: res.stderr });
  expect(stackLines(res.stderr), res.stderr).toEqual([]);
  return res;
}

/** A file a user or a collector reads: searched as UTF-8 and as bytes. */
function collect(path: string, where: string): void {
  if (!existsSync(path)) return;
  const bytes = readFileSync(path);
  seen.push({ where, text: bytes.toString('utf8') });
  seen.push({ where: `${where} (latin1)`, text: bytes.toString('latin1') });
  figures.bytes_searched += bytes.length;
}

function collectState(path: string): void {
  for (const suffix of ['', '-wal', '-shm']) collect(path + suffix, `state file ${path}${suffix}`);
  collect(lockPathOf(path), `lock of state file ${path}`);
}

recordWhenPassed('secrets_pii', () => ({ ...figures, texts_searched: seen.length, needles: needles.size }));

beforeAll(async () => {
  requireBuilt();
  for (const v of [...EMAILS, ...PHONES, ...INVALID_PII]) {
    needles.add(v);
    needles.add(v.toLowerCase());
  }
  serve = await startServe(['--api-key', API_KEY, '--client-secret', CLIENT_SECRET, '--seed', 'reliability-secrets']);
  // the same service, but one request in five fails: error rows and their reasons must not leak either
  flaky = await startServe([
    '--api-key',
    API_KEY,
    '--client-secret',
    CLIENT_SECRET,
    '--seed',
    'reliability-secrets',
    '--fault-500',
    '0.2',
  ]);
}, 60_000);

afterAll(async () => {
  await serve?.stop();
  await flaky?.stop();
  dir.remove();
});

describe('no secret and no raw email or phone in any log, message, summary or state file', () => {
  it('map, remap-due, optout-check and token commands, through success, row errors and refusals', async () => {
    const rows = [
      ['id', 'email', 'phone'],
      ...EMAILS.map((e, i) => [String(i), e, PHONES[i]!]),
      ...INVALID_PII.map((v, i) => [`x${i}`, v, v]),
    ];
    const input = dir.file('people.csv', `${rows.map((r) => r.join(',')).join('\n')}\n`);
    const state = join(dir.path, 'state.db');
    const env = serveEnv(serve);
    const common = ['--email-col', 'email', '--phone-col', 'phone', '--batch-size', '10'];

    // map: fresh state, with row errors from the flaky service (its own state: another base URL), then the good one
    const flakyState = join(dir.path, 'flaky.db');
    const flakyRun = await cli(
      [
        'map',
        input,
        ...common,
        '--state',
        flakyState,
        '--max-attempts',
        '1',
        '-o',
        dir.file('flaky.csv'),
        '--summary-json',
        dir.file('flaky-summary.json'),
        '--rejects',
        dir.file('rejects.csv'),
      ],
      { env: serveEnv(flaky) },
    );
    expect([0, 3]).toContain(flakyRun.code);
    collect(dir.file('flaky-summary.json'), 'map --summary-json (row errors)');
    collectState(flakyState);
    const mapped = await cli(
      [
        'map',
        input,
        ...common,
        '--state',
        state,
        '-o',
        dir.file('mapped.csv'),
        '--summary-json',
        dir.file('map-summary.json'),
      ],
      { env },
    );
    expect(mapped.code, mapped.stderr).toBe(0);
    collect(dir.file('map-summary.json'), 'map --summary-json');
    expect(statSync(state).mode & 0o777).toBe(0o600);
    for (const suffix of ['-wal', '-shm'])
      if (existsSync(state + suffix)) expect(statSync(state + suffix).mode & 0o777).toBe(0o600);
    // a second map answered from the state, with the progress lines of a non-terminal
    const again = await cli(['map', input, ...common, '--state', state, '-o', dir.file('mapped-2.csv')], { env });
    expect(again.code).toBe(0);

    // refused credentials and a failing envelope: one line each, no key, no secret
    const refused = await cli(['map', input, ...common, '-o', dir.file('refused.csv')], {
      env: { ...env, UID2_API_KEY: WRONG_KEY },
    });
    expect(refused.code).toBe(4);
    const badSecret = await cli(['map', input, ...common, '-o', dir.file('bad-secret.csv')], {
      env: { ...env, UID2_CLIENT_SECRET: WRONG_SECRET },
    });
    // no batch got through: the run stops with the credentials' exit code, not rows of error
    expect(badSecret.code).toBe(4);

    // remap-due a year on, and optout-check of the state and of a file of raw UIDs
    await advanceClock(serve.url, 400);
    const nowS = String(Math.floor((await clockOf(serve.url)) / 1000));
    const remapped = await cli(
      [
        'remap-due',
        '--state',
        state,
        '--now',
        nowS,
        '-o',
        dir.file('changes.csv'),
        '--summary-json',
        dir.file('remap-summary.json'),
      ],
      { env },
    );
    expect(remapped.code, remapped.stderr).toBe(0);
    collect(dir.file('remap-summary.json'), 'remap-due --summary-json');
    const swept = await cli(
      ['optout-check', '--state', state, '-o', dir.file('swept.csv'), '--summary-json', dir.file('sweep-summary.json')],
      { env },
    );
    expect(swept.code, swept.stderr).toBe(0);
    collect(dir.file('sweep-summary.json'), 'optout-check --summary-json');
    const rawUids = (parse(readFileSync(dir.file('mapped.csv'), 'utf8'), { columns: true }) as Record<string, string>[])
      .map((r) => r.email_raw_uid)
      .filter(Boolean);
    const idsFile = dir.file('ids.csv', `raw_uid\n${rawUids.join('\n')}\nnot-a-raw-uid\n`);
    const checked = await cli(
      ['optout-check', idsFile, '-o', dir.file('checked.csv'), '--summary-json', dir.file('check-summary.json')],
      { env },
    );
    expect(checked.code, checked.stderr).toBe(0);
    collect(dir.file('check-summary.json'), 'optout-check file --summary-json');
    const wrongKeyCheck = await cli(['optout-check', idsFile, '-o', dir.file('checked-2.csv')], {
      env: { ...env, UID2_API_KEY: WRONG_KEY },
    });
    expect(wrongKeyCheck.code).toBe(4);
    collectState(state);

    // tokens: one identity (email on stdin), refreshed; a batch; validation; a refusal with a damaged key
    const identity = join(dir.path, 'identity.json');
    const generated = await cli(['token', 'generate', '--email', '-', '--out', identity], {
      env,
      input: `${EMAILS[0]}\n`,
    });
    expect(generated.code, generated.stderr).toBe(0);
    needles.add((JSON.parse(readFileSync(identity, 'utf8')) as { refresh_response_key: string }).refresh_response_key);
    const refreshed = await cli(['token', 'refresh', '--in', identity, '--update'], { env });
    expect(refreshed.code, refreshed.stderr).toBe(0);
    const current = JSON.parse(readFileSync(identity, 'utf8')) as {
      refresh_response_key: string;
      refresh_token: string;
      advertising_token: string;
    };
    needles.add(current.refresh_response_key);
    const damaged = dir.file(
      'damaged.json',
      JSON.stringify({ ...current, refresh_response_key: randomBytes(32).toString('base64') }),
    );
    needles.add((JSON.parse(readFileSync(damaged, 'utf8')) as { refresh_response_key: string }).refresh_response_key);
    const refusedRefresh = await cli(['token', 'refresh', '--in', damaged], { env });
    expect(refusedRefresh.code).not.toBe(0);
    const batchInput = dir.file(
      'token-batch.csv',
      `identifier,identifier_type\n${EMAILS.slice(1, 6)
        .map((e) => `${e},email`)
        .join('\n')}\n${PHONES[7]},phone\n${INVALID_PII[0]},email\n`,
    );
    const batch = await cli(
      [
        'token',
        'generate',
        '--input',
        batchInput,
        '-o',
        dir.file('tokens.csv'),
        '--summary-json',
        dir.file('tokens-summary.json'),
      ],
      { env },
    );
    expect(batch.code, batch.stderr).toBe(0);
    collect(dir.file('tokens-summary.json'), 'token generate --summary-json');
    for (const row of parse(readFileSync(dir.file('tokens.csv'), 'utf8'), { columns: true }) as Record<
      string,
      string
    >[])
      if (row.refresh_response_key) needles.add(row.refresh_response_key);
    expect(statSync(dir.file('tokens.csv')).mode & 0o777).toBe(0o600);
    const valid = await cli(['token', 'validate', '--token', current.advertising_token, '--email', '-'], {
      env,
      input: `${EMAILS[0]}\n`,
    });
    expect(valid.code, valid.stderr).toBe(0);
    const invalidLocally = await cli(['token', 'validate', '--token', current.advertising_token, '--email', '-'], {
      env,
      input: `${INVALID_PII[1]}\n`,
    });
    expect(invalidLocally.code).toBe(2);
    const wrongKeyToken = await cli(['token', 'generate', '--email', '-'], {
      env: { ...env, UID2_API_KEY: WRONG_KEY },
      input: `${EMAILS[2]}\n`,
    });
    expect(wrongKeyToken.code).toBe(4);

    // anything written beside the files the commands were asked for (a log, a lock, a temp file) is searched too
    for (const name of readdirSync(dir.path)) {
      if (/\.(csv|json|db|db-wal|db-shm)$/.test(name)) continue;
      collect(join(dir.path, name), `other file ${name}`);
    }

    const leaks: string[] = [];
    for (const { where, text } of seen)
      for (const needle of needles)
        if (needle !== '' && text.includes(needle)) leaks.push(`${where}: ${needle.slice(0, 12)}…`);
    figures.leaks = leaks.length;
    expect(leaks).toEqual([]);
  }, 240_000);
});

describe('secrets never as flag values; plain http only to this machine', () => {
  const commands: string[][] = [
    ['map', 'in.csv'],
    ['remap-due', '--state', 's.db'],
    ['optout-check', 'in.csv'],
    ['token', 'generate', '--email', '-'],
    ['token', 'refresh', '--in', 'id.json'],
    ['token', 'validate', '--token', 't', '--email', '-'],
    ['doctor'],
  ];
  const flags: [string, string][] = [
    ['--api-key', 'UID2_API_KEY'],
    ['--client-secret', 'UID2_CLIENT_SECRET'],
  ];
  for (const command of commands) {
    for (const [flag, variable] of flags) {
      for (const form of ['separate', 'equals'] as const) {
        it(`${command.slice(0, 2).join(' ')} ${flag}${form === 'equals' ? '=VALUE' : ' VALUE'}: refused (exit 2), naming ${variable} and ${flag}-file, without the value`, async () => {
          const value = `Canary${randomBytes(9).toString('base64url')}`;
          const res = await cli([...command, ...(form === 'equals' ? [`${flag}=${value}`] : [flag, value])], {
            input: '',
          });
          expect(res.code).toBe(2);
          const lines = res.stderr.trim().split('\n');
          expect(lines).toHaveLength(1);
          expect(lines[0]).toContain(variable);
          expect(lines[0]).toContain(`${flag}-file`);
          expect(res.stderr).not.toContain(value);
        });
      }
    }
  }

  for (const url of [
    'http://10.1.2.3:8080',
    'http://operator.example.com',
    'http://localhost.example.com:9000',
    'http://[2001:db8::1]:8080',
  ]) {
    it(`--base-url ${url}: refused without --insecure-http (exit 2), accepted with it`, async () => {
      const input = dir.file('one.csv', 'email\na@example.com\n');
      const env = { UID2_API_KEY: API_KEY, UID2_CLIENT_SECRET: CLIENT_SECRET };
      const refused = await cli(['map', input, '--base-url', url, '-o', dir.file('never.csv')], { env });
      expect(refused.code).toBe(2);
      expect(refused.stderr).toMatch(/--insecure-http/);
      expect(refused.stderr).toMatch(/http:\/\//);
      expect(existsSync(dir.file('never.csv'))).toBe(false);
      // --dry-run: the configuration is checked and accepted, and nothing leaves this machine
      const accepted = await cli(['map', input, '--base-url', url, '--insecure-http', '--dry-run'], { env });
      expect(accepted.code, accepted.stderr).toBe(0);
      expect(accepted.stderr).not.toMatch(/--insecure-http/);
    });
  }

  it('the same refusal for remap-due, optout-check and token commands', async () => {
    const env = { UID2_API_KEY: API_KEY, UID2_CLIENT_SECRET: CLIENT_SECRET };
    writeFileSync(dir.file('one.csv'), 'raw_uid\n');
    for (const command of [
      ['remap-due', '--state', dir.file('none.db')],
      ['optout-check', dir.file('one.csv')],
      ['token', 'generate', '--email', '-'],
      ['token', 'validate', '--token', 't', '--email', '-'],
    ]) {
      const res = await cli([...command, '--base-url', 'http://10.9.8.7'], { env, input: 'a@example.com\n' });
      expect(res.code, `${command.join(' ')}: ${res.stderr}`).toBe(2);
      expect(res.stderr).toMatch(/--insecure-http/);
    }
  });
});
