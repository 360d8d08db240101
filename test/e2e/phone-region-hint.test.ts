import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import { tempDir } from '../helpers/map-e2e-data.js';
import { runCli } from '../helpers/map-e2e-processes.js';

// A run given no phone region whose phones are mostly national numbers says once, on stderr, which flag to add.
const dir = tempDir('phone-region-hint');
const HINT =
  "uid2-batch: most phones were invalid for want of a country code (3 of 4 are written as national or formatted numbers, not E.164): add --phone-region CC (the country they are written in) or --phone-region-col COL (a column naming each row's country)\n";
/** Three national numbers, one E.164, one junk cell (not written as a number: not counted). */
const PHONES = ['(617) 555-0102', '020 7946 0958', '90685 36153', '+16175550103', 'unknown'];

let national: string;
let e164: string;

beforeAll(() => {
  ensureBuilt();
  national = dir.file('national.csv', `id,phone\n${PHONES.map((p, i) => `${i},"${p}"`).join('\n')}\n`);
  e164 = dir.file('e164.csv', 'id,phone\n1,+16175550102\n2,+442079460958\n3,617 555 0102\n');
}, 120_000);

afterAll(() => dir.remove());

function hintsIn(stderr: string): number {
  return stderr.split(HINT).length - 1;
}

describe('the phone region hint', () => {
  it.each([['0'], ['2']])('map --threads %s says it once, with counts and no phone number', async (threads) => {
    const run = await runCli(['map', national, '--phone-col', 'phone', '--env', 'local', '--threads', threads]);
    expect(run.code, run.stderr).toBe(0);
    expect(hintsIn(run.stderr)).toBe(1);
    for (const p of PHONES) expect(run.stderr).not.toContain(p);
  });

  it('map --dry-run and hash say it too; a token batch says it', async () => {
    const batch = dir.file(
      'tokens.csv',
      `identifier,identifier_type\n${PHONES.map((p) => `"${p}",phone`).join('\n')}\n`,
    );
    const runs = await Promise.all([
      runCli(['map', national, '--phone-col', 'phone', '--env', 'local', '--dry-run']),
      runCli(['hash', national, '--phone-col', 'phone', '--threads', '2']),
      runCli(['hash', national, '--phone-col', 'phone', '--threads', '0']),
      runCli(['token', 'generate', '--input', batch, '--env', 'local', '-o', dir.file('tokens-out.csv')]),
    ]);
    for (const run of runs) {
      expect(run.code, run.stderr).toBe(0);
      expect(hintsIn(run.stderr), run.stderr).toBe(1);
    }
    expect(readFileSync(dir.file('tokens-out.csv'), 'utf8')).toContain('invalid');
  });

  it('is not said with a region, when most phones are E.164, or with --quiet', async () => {
    const runs = await Promise.all([
      runCli(['map', national, '--phone-col', 'phone', '--env', 'local', '--phone-region', 'US']),
      runCli(['map', e164, '--phone-col', 'phone', '--env', 'local']),
      runCli(['map', national, '--phone-col', 'phone', '--env', 'local', '--quiet']),
      runCli(['hash', national, '--phone-col', 'phone', '--phone-region', 'GB']),
    ]);
    for (const run of runs) {
      expect(run.code, run.stderr).toBe(0);
      expect(run.stderr).not.toContain('for want of a country code');
    }
  });
});
