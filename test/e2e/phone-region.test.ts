import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import { column, parseCsv, tempDir } from '../helpers/map-e2e-data.js';
import { runCli } from '../helpers/map-e2e-processes.js';

// --phone-region through the built CLI against the embedded service: national numbers map as their E.164 forms do.
const dir = tempDir('phone-region');
const LOCAL = ['--env', 'local', '--quiet'];

/** The same US numbers in E.164, and as people write them. */
const E164 = ['+16175550102', '+12125550147', '+14155550100', '+13125550123'];
const WRITTEN = ['(617) 555-0102', '212.555.0147', '1-415-555-0100', '+1 312 555 0123'];

function csv(phones: readonly string[]): string {
  return `id,phone\n${phones.map((p, i) => `00${i},"${p}"`).join('\n')}\n`;
}

let e164In: string;
let writtenIn: string;

beforeAll(() => {
  ensureBuilt();
  e164In = dir.file('e164.csv', csv(E164));
  writtenIn = dir.file('written.csv', csv(WRITTEN));
}, 120_000);

afterAll(() => dir.remove());

describe('--phone-region', () => {
  it('map --phone-region US maps national numbers to the raw UIDs of their E.164 forms; without it they are invalid', async () => {
    const [reference, national, without] = await Promise.all([
      runCli(['map', e164In, '--phone-col', 'phone', ...LOCAL]),
      runCli(['map', writtenIn, '--phone-col', 'phone', '--phone-region', 'US', ...LOCAL]),
      runCli(['map', writtenIn, '--phone-col', 'phone', ...LOCAL]),
    ]);
    for (const r of [reference, national, without]) expect(r.code, r.stderr).toBe(0);
    const want = parseCsv(reference.stdout);
    const got = parseCsv(national.stdout);
    expect(column(want, 'status')).toEqual(E164.map(() => 'mapped'));
    expect(column(got, 'status')).toEqual(column(want, 'status'));
    expect(column(got, 'raw_uid')).toEqual(column(want, 'raw_uid'));
    // the input cells stay as they were read
    expect(column(got, 'phone')).toEqual(WRITTEN);
    // without a region none is in the E.164 shape the service takes (spaces and punctuation are refused)
    expect(column(parseCsv(without.stdout), 'status')).toEqual(WRITTEN.map(() => 'invalid'));
  });

  it('hash --phone-region US gives the hashes of the E.164 forms, with or without row threads', async () => {
    const runs = await Promise.all([
      runCli(['hash', e164In, '--phone-col', 'phone', '--quiet']),
      runCli(['hash', writtenIn, '--phone-col', 'phone', '--phone-region', 'us', '--quiet', '--threads', '0']),
      runCli(['hash', writtenIn, '--phone-col', 'phone', '--phone-region', 'US', '--quiet', '--threads', '2']),
    ]);
    for (const r of runs) expect(r.code, r.stderr).toBe(0);
    const [reference, ...national] = runs.map((r) => column(parseCsv(r.stdout), 'hash'));
    expect(reference.every((h) => h.length === 44)).toBe(true);
    for (const hashes of national) expect(hashes).toEqual(reference);
  });

  it('token generate --phone in national form with --phone-region, and in a --input batch', async () => {
    const single = await runCli(['token', 'generate', '--phone', '(617) 555-0102', '--phone-region', 'US', ...LOCAL]);
    expect(single.code, single.stderr).toBe(0);
    expect(JSON.parse(single.stdout)).toHaveProperty('advertising_token');
    const refused = await runCli(['token', 'generate', '--phone', '(617) 555-0102', ...LOCAL]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/^uid2-batch: --phone: invalid phone[^\n]*\n$/);
    const batch = dir.file(
      'tokens.csv',
      `identifier,identifier_type\n"(617) 555-0102",phone\n"+1 617 555 0102",phone\n`,
    );
    const out = dir.file('tokens-out.csv');
    const run = await runCli(['token', 'generate', '--input', batch, '--phone-region', 'US', '-o', out, ...LOCAL]);
    expect(run.code, run.stderr).toBe(0);
    expect(column(parseCsv(readFileSync(out, 'utf8')), 'status')).toEqual(['success', 'success']);
  });

  it("a profile's phone_region applies when the flag is absent; the flag goes before it", async () => {
    const config = dir.file(
      'config.json',
      JSON.stringify({
        profiles: { crm: { env: 'local', phone_region: 'US' }, bad: { env: 'local', phone_region: 'USA' } },
      }),
    );
    const [byProfile, overridden, bad] = await Promise.all([
      runCli(['map', writtenIn, '--phone-col', 'phone', '--config', config, '--profile', 'crm', '--quiet']),
      runCli([
        'map',
        writtenIn,
        '--phone-col',
        'phone',
        '--config',
        config,
        '--profile',
        'crm',
        '--phone-region',
        'GB',
        '--quiet',
      ]),
      runCli(['map', writtenIn, '--phone-col', 'phone', '--config', config, '--profile', 'bad', '--quiet']),
    ]);
    expect(byProfile.code, byProfile.stderr).toBe(0);
    expect(column(parseCsv(byProfile.stdout), 'status')).toEqual(WRITTEN.map(() => 'mapped'));
    expect(overridden.code, overridden.stderr).toBe(0);
    // read as British numbers, the US national forms are not valid; the one with its own +1 still is
    expect(column(parseCsv(overridden.stdout), 'status')).toEqual(['invalid', 'invalid', 'invalid', 'mapped']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe(
      "uid2-batch: phone_region of profile 'bad': phone region 'USA' is not a two-letter ISO 3166 country code: give one such as US, GB, FR or DE\n",
    );
  });

  it('a region that is not one is a usage error in one line, before the input is read', async () => {
    const run = await runCli([
      'map',
      dir.file('missing.csv'),
      '--phone-col',
      'phone',
      '--phone-region',
      'XX',
      ...LOCAL,
    ]);
    expect(run.code).toBe(2);
    expect(run.stderr).toBe(
      "uid2-batch: --phone-region: phone region 'XX' is not a country with a known phone numbering plan: give a two-letter ISO 3166 code such as US, GB, FR or DE\n",
    );
  });
});
