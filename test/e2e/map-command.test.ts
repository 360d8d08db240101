import { PassThrough } from 'node:stream';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { runMap, mapFlags, type MapDeps } from '../../src/cli/map/map.js';
import { UserError } from '../../src/cli/shared/exit-codes.js';
import { emailRows, parseCsv, column, tempDir } from '../helpers/map-e2e-data.js';

// runMap called directly, with injected streams (no child process): the command's own decisions.
const dir = tempDir('command');
afterAll(() => dir.remove());

function io(stdinText?: string, stdinIsTTY = false) {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = '';
  let err = '';
  stdout.on('data', (d: Buffer) => (out += d.toString()));
  stderr.on('data', (d: Buffer) => (err += d.toString()));
  const stdin = Object.assign(new PassThrough(), { isTTY: stdinIsTTY });
  if (stdinText !== undefined) stdin.end(stdinText);
  const deps: MapDeps = { stdin, stdout, stderr, env: { XDG_CONFIG_HOME: dir.path }, now: () => Date.now() };
  return { deps, out: () => out, err: () => err };
}

function flags(input: string | undefined, opts: Record<string, unknown>) {
  return mapFlags(input, {
    format: 'csv',
    env: 'local',
    emailCol: [],
    phoneCol: [],
    emailHashCol: [],
    phoneHashCol: [],
    ...opts,
  });
}

describe('runMap', () => {
  it('asks for input when there is no file and stdin is a terminal', async () => {
    const t = io(undefined, true);
    await expect(runMap(flags(undefined, {}), t.deps)).rejects.toThrow(UserError);
    await expect(runMap(flags(undefined, {}), t.deps)).rejects.toThrow(/pipe rows in/);
  });

  it('reads stdin when no input is named and stdin is not a terminal', async () => {
    const t = io('email\na@example.com\n');
    expect(await runMap(flags(undefined, {}), t.deps)).toBe(0);
    expect(column(parseCsv(t.out()), 'status')).toEqual(['mapped']);
    expect(t.err()).toMatch(/using column 'email'/);
  });

  it('takes the shared input options: --no-header, --encoding latin1, --input-format jsonl', async () => {
    const noHeader = io('jos\xe9@example.com\n');
    const latin1 = Buffer.from('email\njos\xe9@example.com\n', 'latin1');
    const file = dir.file('latin1.csv');
    writeFileSync(file, latin1);
    // the same bytes read as UTF-8 would be invalid; as latin1 they are the address josé@example.com
    const t = io();
    expect(await runMap(flags(file, { encoding: 'latin1' }), t.deps)).toBe(0);
    expect(column(parseCsv(t.out()), 'email')).toEqual(['jos\u00e9@example.com']);
    expect(await runMap(flags(undefined, { header: false, col: 'col1', type: 'email' }), noHeader.deps)).toBe(0);
    expect(parseCsv(noHeader.out()).header.slice(0, 2)).toEqual(['col1', 'raw_uid']);
    const j = io('{"email":"a@example.com"}\n');
    expect(await runMap(flags('-', { inputFormat: 'jsonl' }), j.deps)).toBe(0);
    expect(column(parseCsv(j.out()), 'status')).toEqual(['mapped']);
  });

  it('caps --concurrency at 20 for the public service, and says so', async () => {
    const t = io();
    const input = dir.file('cap.csv', emailRows(10));
    const code = await runMap(flags(input, { env: 'integ', concurrency: 50, dryRun: true }), {
      ...t.deps,
      env: { ...t.deps.env, UID2_API_KEY: 'k', UID2_CLIENT_SECRET: Buffer.alloc(32).toString('base64') },
    });
    expect(code).toBe(0);
    expect(t.err()).toMatch(/--concurrency 50 lowered to 20/);
  });

  it('dry-runs against a state file that does not exist yet', async () => {
    const t = io();
    const state = dir.file('missing.db');
    const code = await runMap(flags(dir.file('dry.csv', emailRows(100)), { dryRun: true, state }), t.deps);
    expect(code).toBe(0);
    expect(t.err()).toMatch(/does not exist yet/);
    expect(existsSync(state)).toBe(false);
    expect(t.err()).toMatch(/1 request\(s\) would be sent/);
  });

  it('stops on the signal: exit 130, output file not written, state keeps what was answered', async () => {
    const t = io();
    const stop = new AbortController();
    const output = dir.file('stopped.csv');
    const state = dir.file('stopped.db');
    stop.abort();
    const code = await runMap(flags(dir.file('stop.csv', emailRows(2_000)), { output, state, batchSize: 100 }), {
      ...t.deps,
      signal: stop.signal,
    });
    expect(code).toBe(130);
    expect(existsSync(output)).toBe(false);
    expect(t.err()).toMatch(/interrupted: .* was not written/);
    const resumed = io();
    expect(await runMap(flags(dir.file('stop.csv'), { output, state, batchSize: 100 }), resumed.deps)).toBe(0);
    expect(parseCsv(readFileSync(output, 'utf8')).rows).toHaveLength(2_000);
  });
});
