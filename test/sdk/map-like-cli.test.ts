// mapIdentities and the CLI's `map` give the same raw UIDs, statuses and reasons for the same input: the library's
// startLocalService() and `map --env local` run the same service with the same default seed.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IdentityClient, type IdentityMapResult, startLocalService, type LocalServiceHandle } from 'uid2-batch';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import { column, parseCsv, tempDir } from '../helpers/map-e2e-data.js';
import { runCli } from '../helpers/map-e2e-processes.js';

const dir = tempDir('sdk-cli');
let svc: LocalServiceHandle;

beforeAll(async () => {
  ensureBuilt();
  svc = await startLocalService();
}, 120_000);

afterAll(async () => {
  await svc?.stop();
  dir.remove();
});

/** The CLI's four result cells of one identifier, as mapIdentities says them. */
function cellsOf(result: IdentityMapResult): { raw_uid: string; status: string; reason: string } {
  return result.status === 'mapped'
    ? { raw_uid: result.rawUid, status: 'mapped', reason: '' }
    : { raw_uid: '', status: result.status, reason: result.reason };
}

describe('mapIdentities and uid2-batch map', () => {
  it('answer the same raw UIDs for the same emails and phones', async () => {
    const email = [
      'Jane.Doe+news@Gmail.com',
      'optout@example.com',
      'not an email',
      'jane.doe@gmail.com',
      ...Array.from({ length: 40 }, (_, i) => `person.${i}@example.com`),
    ];
    const phone = [
      '(415) 555-0100',
      '+00000000000',
      '12',
      '+14155550100',
      ...email.slice(4).map((_, i) => `+1415555${String(1000 + i)}`),
    ];
    const csv = ['email,phone', ...email.map((e, i) => `"${e}",${phone[i]}`)].join('\n');
    const input = dir.file('people.csv', `${csv}\n`);
    const output = dir.file('people-out.csv');
    const cli = await runCli([
      'map',
      input,
      '--email-col',
      'email',
      '--phone-col',
      'phone',
      '--phone-region',
      'US',
      '--env',
      'local',
      '-o',
      output,
    ]);
    expect(cli.stderr).toMatch(/ 0 error;/);
    expect(cli.code).toBe(0);
    const table = parseCsv(readFileSync(output, 'utf8'));

    const client = new IdentityClient({ baseUrl: svc.url, apiKey: svc.apiKey, clientSecret: svc.clientSecret });
    try {
      const out = await client.mapIdentities({ email, phone }, { phoneRegion: 'US' });
      for (const kind of ['email', 'phone'] as const) {
        const fromCli = column(table, `${kind}_raw_uid`).map((rawUid, i) => ({
          raw_uid: rawUid,
          status: column(table, `${kind}_status`)[i],
          reason: column(table, `${kind}_reason`)[i],
        }));
        expect(out[kind].map(cellsOf)).toEqual(fromCli);
      }
      expect(out.email.filter((r) => r.status === 'mapped')).toHaveLength(email.length - 2);
    } finally {
      await client.close();
    }
  });
});
