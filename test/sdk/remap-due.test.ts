// remapDue over a state file made by mapRows: the due entries re-mapped once, their changes handed over, and a
// second run at the same time finds nothing due.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ArgumentError,
  IdentityClient,
  type LocalServiceHandle,
  mapRows,
  openStateFor,
  type RemapDueChange,
  startLocalService,
} from 'uid2-batch';
import { tempDir } from '../helpers/map-e2e-data.js';

const dir = tempDir('sdk-remap');
let svc: LocalServiceHandle;
let client: IdentityClient;

beforeAll(async () => {
  svc = await startLocalService();
  client = new IdentityClient({ baseUrl: svc.url, apiKey: svc.apiKey, clientSecret: svc.clientSecret });
});

afterAll(async () => {
  await client?.close();
  await svc?.stop();
  dir.remove();
});

async function serviceClock(body?: object): Promise<number> {
  const answer = await fetch(`${svc.url}/_local/clock`, body ? { method: 'POST', body: JSON.stringify(body) } : {});
  return ((await answer.json()) as { now_ms: number }).now_ms;
}

describe('remapDue', () => {
  it('re-maps what is due in a state file, once, and hands over what changed', async () => {
    const state = openStateFor(dir.file('people.db'), { baseUrl: svc.url });
    try {
      const emails = Array.from({ length: 300 }, (_, i) => [`person.${i}@example.com`]);
      const before = new Map<string, string>();
      for await (const row of mapRows(emails, {
        columns: [{ index: 0, kind: 'email' }],
        baseUrl: svc.url,
        apiKey: svc.apiKey,
        clientSecret: svc.clientSecret,
        state,
      })) {
        const result = row.results[0];
        if (result.status === 'mapped') before.set(row.cells[0], result.rawUid);
      }
      expect(before.size).toBe(300);

      const sent = svc.stats().requests['/v3/identity/map'] ?? 0;
      const nothingYet = await client.remapDue(state);
      expect(nothingYet.counts.selected).toBe(0);
      expect(svc.stats().requests['/v3/identity/map'] ?? 0).toBe(sent);

      const later = new Date(await serviceClock({ advance_days: 400 }));
      const changes: RemapDueChange[] = [];
      const run = await client.remapDue(state, { now: later, onChanges: (c) => void changes.push(...c) });
      expect(run.counts.selected).toBe(300);
      expect(run.counts.status.mapped).toBe(300);
      expect(run.requestErrors).toEqual([]);
      expect(changes.length).toBe(run.counts.changed);
      expect(changes.length).toBeGreaterThan(0);
      const oldRawUids = new Set(before.values());
      for (const change of changes) {
        expect(change.status).toBe('mapped');
        expect(oldRawUids.has(change.oldRawUid as string)).toBe(true);
        expect(change.rawUid).not.toBe(change.oldRawUid);
        expect(change.refreshFrom?.getTime()).toBeGreaterThan(later.getTime());
      }
      // the new raw UIDs are what a map at that time answers
      const now = await client.mapIdentities({ email: emails.map((e) => e[0]) });
      const nowRawUids = new Set(now.email.map((r) => (r.status === 'mapped' ? r.rawUid : '')));
      for (const change of changes) expect(nowRawUids.has(change.rawUid as string)).toBe(true);

      const again = await client.remapDue(state, { now: later });
      expect(again.counts.selected).toBe(0);
    } finally {
      state.close();
    }
  });

  it('refuses what is not a state file, before anything is sent', async () => {
    await expect(client.remapDue({} as never)).rejects.toThrow(ArgumentError);
    await expect(client.remapDue(null as never)).rejects.toThrow(/openStateFor/);
  });
});
