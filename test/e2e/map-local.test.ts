import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import { column, emailRows, parseCsv, tempDir } from '../helpers/map-e2e-data.js';
import { runCli, serveConnection, startServe, type ServeProcess } from '../helpers/map-e2e-processes.js';

// --env local: the embedded service, started in the CLI's own process, with no credentials at all.
const dir = tempDir('local');
let serve: ServeProcess;

beforeAll(async () => {
  ensureBuilt();
  serve = await startServe();
}, 120_000);

afterAll(async () => {
  await serve?.stop();
  dir.remove();
});

describe('map --env local', () => {
  it('maps with no credentials, the same raw UIDs as `serve` with the same (default) seed', async () => {
    const csv = [
      'id,contact',
      '1,Jane.Doe+news@Gmail.com',
      '2,+14155550100',
      '3,optout@example.com',
      '4,+00000000000',
      '5,not an identifier',
      '6,jane.doe@gmail.com',
      '',
    ].join('\n');
    const input = dir.file('contacts.csv', csv);
    const output = dir.file('local-out.csv');
    const local = await runCli([
      'map',
      input,
      '--col',
      'contact',
      '--type',
      'auto',
      '--env',
      'local',
      '-o',
      output,
      '--state',
      dir.file('local.db'),
    ]);
    expect(local.stderr).not.toMatch(/UID2_API_KEY|credential/);
    expect(local.code).toBe(0);
    const table = parseCsv(readFileSync(output, 'utf8'));
    expect(column(table, 'status')).toEqual(['mapped', 'mapped', 'optout', 'optout', 'invalid', 'mapped']);
    expect(column(table, 'raw_uid')[5]).toBe(column(table, 'raw_uid')[0]);

    const c = serveConnection(serve);
    const viaServe = await runCli(['map', input, '--col', 'contact', '--type', 'auto', ...c.args], { env: c.env });
    expect(viaServe.code).toBe(0);
    expect(viaServe.stdout).toBe(readFileSync(output, 'utf8'));
  });

  it('keeps its state file to itself: another environment is refused with exit 2', async () => {
    const state = dir.file('local-only.db');
    const input = dir.file('few.csv', emailRows(20));
    expect((await runCli(['map', input, '--env', 'local', '--state', state, '--quiet'])).code).toBe(0);
    const other = await runCli(['map', input, '--env', 'integ', '--state', state, '--dry-run'], {
      env: { UID2_API_KEY: 'k', UID2_CLIENT_SECRET: Buffer.alloc(32).toString('base64') },
    });
    expect(other.code).toBe(2);
    expect(other.stderr).toMatch(/UID2:local/);
  });

  it('reports a dry run without sending: valid, invalid by reason, unique, from state, batches', async () => {
    const state = dir.file('dry.db');
    const input = dir.file('dry.csv', emailRows(1_000));
    expect(
      (await runCli(['map', dir.file('dry-half.csv', emailRows(500)), '--env', 'local', '--state', state, '--quiet']))
        .code,
    ).toBe(0);
    const summaryPath = dir.file('dry-summary.json');
    const dry = await runCli([
      'map',
      input,
      '--env',
      'local',
      '--state',
      state,
      '--dry-run',
      '--batch-size',
      '100',
      '--summary-json',
      summaryPath,
    ]);
    expect(dry.code).toBe(0);
    expect(dry.stdout).toBe('');
    expect(dry.stderr).toMatch(/nothing was sent/);
    expect(dry.stderr).toMatch(/20 invalid email/);
    const summary = JSON.parse(readFileSync(summaryPath, 'utf8'));
    expect(summary).toMatchObject({
      dry_run: true,
      rows: 1_000,
      valid: 980,
      requests: 0,
      invalid_by_reason: { 'invalid email': 20 },
    });
    // rows 0..499 were mapped into the state by the first run: their repeats and themselves are answered from it
    expect(summary.from_state).toBeGreaterThanOrEqual(480);
    // rows 0..499 hold 485 distinct valid addresses (10 broken, 5 repeats)
    expect(summary.identifiers_to_send).toBe(summary.unique_identifiers - 485);
    expect(summary.batches).toBe(Math.ceil(summary.identifiers_to_send / 100));
  });
});
