import { describe, expect, it } from 'vitest';
import type { MapV3ResponseBody } from '../../src/protocol/index.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  mapRows,
  MapInterruptedError,
  openStateFor,
  type MappedRow,
  type MapRowsSummary,
  type ServiceClient,
} from '../../src/index.js';
import { parsePhoneRegion, sha256Base64 } from '../../src/identity/index.js';
import { UnauthorizedError } from '../../src/protocol/index.js';
import { FakeMapper, rawUidOf, seeded } from './engine-fakes.js';

function fakeClient(mapper: FakeMapper): ServiceClient {
  const unused = () => Promise.reject(new Error('not used'));
  return {
    stats: { requests: 0, retries: 0, http429: 0, http5xx: 0, networkErrors: 0 },
    lastServerTime: undefined,
    proxyRoute: { kind: 'direct', why: 'a fake client sends nothing' },
    mapV3: (request, options) =>
      mapper.mapBatch(request, options?.signal ?? new AbortController().signal) as Promise<MapV3ResponseBody>,
    mapV2: unused,
    buckets: unused,
    optoutStatus: unused,
    tokenGenerate: unused,
    tokenRefresh: unused,
    tokenValidate: unused,
    healthcheck: unused,
    close: () => Promise.resolve(),
  };
}

async function collect(it: AsyncIterable<MappedRow>): Promise<MappedRow[]> {
  const out: MappedRow[] = [];
  for await (const row of it) out.push(row);
  return out;
}

describe('mapRows (library API)', () => {
  it('yields one row per input row, in order, with typed results per identifier column', async () => {
    const random = seeded(5);
    const mapper = new FakeMapper({ latency: () => Math.floor(random() * 5) });
    const input = Array.from({ length: 2_500 }, (_, i) => [
      String(i),
      `u${i}@example.com`,
      i % 10 === 0 ? 'junk' : `+1415555${String(1000 + (i % 9000)).padStart(4, '0')}`,
    ]);
    let summary: MapRowsSummary | undefined;
    const rows = await collect(
      mapRows(input, {
        client: fakeClient(mapper),
        columns: [
          { index: 1, kind: 'email' },
          { index: 2, kind: 'auto', name: 'phone' },
        ],
        batchSize: 300,
        onDone: (s) => (summary = s),
      }),
    );
    expect(rows.map((r) => r.cells[0])).toEqual(input.map((r) => r[0]));
    expect(rows[1].results[0]).toEqual({
      status: 'mapped',
      rawUid: rawUidOf('email', sha256Base64('u1@example.com')),
      prevRawUid: null,
      refreshFrom: expect.any(Number),
      reason: null,
    });
    expect(rows[0].results[1]).toMatchObject({
      status: 'invalid',
      rawUid: null,
      reason: expect.stringMatching(/^unrecognized identifier/),
    });
    expect(summary?.counts.rowsDone).toBe(2_500);
    expect(summary?.counts.status.invalid).toBe(250);
  });

  it('phoneRegion reads national numbers of phone and auto columns as their E.164 forms', async () => {
    const us = parsePhoneRegion('US');
    const input = [
      ['(415) 555-0100', '415.555.0101', 'u@example.com'],
      ['+1 415 555 0102', 'junk', '4155550103'],
    ];
    const columns = [
      { index: 0, kind: 'phone' as const },
      { index: 1, kind: 'auto' as const },
      { index: 2, kind: 'auto' as const },
    ];
    const withRegion = await collect(
      mapRows(input, { client: fakeClient(new FakeMapper()), columns, phoneRegion: us }),
    );
    const rawUid = (e164: string) => rawUidOf('phone', sha256Base64(e164));
    expect(withRegion.map((r) => r.results.map((x) => x.rawUid))).toEqual([
      [rawUid('+14155550100'), rawUid('+14155550101'), rawUidOf('email', sha256Base64('u@example.com'))],
      [rawUid('+14155550102'), null, rawUid('+14155550103')],
    ]);
    const without = await collect(mapRows(input, { client: fakeClient(new FakeMapper()), columns }));
    expect(without.flatMap((r) => r.results.map((x) => x.status))).toEqual([
      'invalid',
      'invalid',
      'mapped',
      'invalid',
      'invalid',
      'invalid',
    ]);
  });

  it('phoneRegionColumn reads each row in its own country; phoneRegion is for empty cells', async () => {
    const input = [
      ['(21) 2690-3311', 'Brazil'],
      ['90685 36153', 'in'],
      ['(617) 555-0102', ''],
      ['0055 21 2690 3311', 'Deutschland'],
      ['(21) 2690-3311', 'Narnia'],
    ];
    const out = await collect(
      mapRows(input, {
        client: fakeClient(new FakeMapper()),
        columns: [{ index: 0, kind: 'phone' }],
        phoneRegion: parsePhoneRegion('US'),
        phoneRegionColumn: 1,
      }),
    );
    const rawUid = (e164: string) => rawUidOf('phone', sha256Base64(e164));
    expect(out.map((r) => r.results[0].rawUid)).toEqual([
      rawUid('+552126903311'),
      rawUid('+919068536153'),
      rawUid('+16175550102'),
      rawUid('+552126903311'),
      null,
    ]);
    expect(out[4].results[0].reason).toBe(
      "invalid phone: the row's country 'Narnia' is not an ISO 3166 code or a country name this tool knows",
    );
    expect(out.map((r) => r.cells)).toEqual(input);
  });

  it('\\N, and the nullValues given, are missing, not invalid; the cells stay as given', async () => {
    const input = [['\\N'], ['NULL'], ['a@example.com']];
    const columns = [{ index: 0, kind: 'email' as const }];
    const plain = await collect(mapRows(input, { client: fakeClient(new FakeMapper()), columns }));
    expect(plain.map((r) => r.results[0].status)).toEqual(['missing', 'invalid', 'mapped']);
    const marked = await collect(
      mapRows(input, { client: fakeClient(new FakeMapper()), columns, nullValues: ['NULL'] }),
    );
    expect(marked.map((r) => r.results[0].status)).toEqual(['missing', 'missing', 'mapped']);
    expect(marked.map((r) => r.cells)).toEqual(input);
  });

  it('stops the engine when the consumer stops early', async () => {
    const mapper = new FakeMapper({ latency: () => 2 });
    const input = Array.from({ length: 20_000 }, (_, i) => [`u${i}@example.com`]);
    let n = 0;
    for await (const row of mapRows(input, {
      client: fakeClient(mapper),
      columns: [{ index: 0, kind: 'email' }],
      batchSize: 100,
    })) {
      expect(row.results[0].status).toBe('mapped');
      if (++n === 150) break;
    }
    const sent = mapper.itemsSent;
    expect(sent).toBeLessThan(20_000);
    await new Promise((r) => setTimeout(r, 30));
    expect(mapper.itemsSent).toBe(sent);
  });

  it('throws the 401 and an interruption', async () => {
    const refused = new FakeMapper({ failOn: () => new UnauthorizedError(401, 'unauthorized', 'Unauthorized') });
    await expect(
      collect(mapRows([['a@example.com']], { client: fakeClient(refused), columns: [{ index: 0, kind: 'email' }] })),
    ).rejects.toBeInstanceOf(UnauthorizedError);

    const stop = new AbortController();
    stop.abort();
    await expect(
      collect(
        mapRows([['a@example.com']], {
          client: fakeClient(new FakeMapper()),
          columns: [{ index: 0, kind: 'email' }],
          signal: stop.signal,
        }),
      ),
    ).rejects.toBeInstanceOf(MapInterruptedError);
  });

  it('answers repeats of a later run from a state file opened with openStateFor', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'uid2-maprows-'));
    try {
      const path = join(dir, 'state.db');
      const input = Array.from({ length: 300 }, (_, i) => [`u${i}@example.com`]);
      const columns = [{ index: 0, kind: 'email' as const }];
      const first = new FakeMapper();
      let store = openStateFor(path, { baseUrl: 'https://operator-integ.uidapi.com' });
      const one = await collect(mapRows(input, { client: fakeClient(first), columns, state: store }));
      store.close();
      expect(first.itemsSent).toBe(300);

      const second = new FakeMapper();
      store = openStateFor(path, { baseUrl: 'https://operator-integ.uidapi.com/' });
      let summary: MapRowsSummary | undefined;
      const two = await collect(
        mapRows(input, { client: fakeClient(second), columns, state: store, onDone: (s) => (summary = s) }),
      );
      store.close();
      expect(second.itemsSent).toBe(0);
      expect(summary?.counts.fromState).toBe(300);
      expect(two.map((r) => r.results[0])).toEqual(one.map((r) => r.results[0]));
      expect(() => openStateFor(path, { baseUrl: 'https://global.prod.uidapi.com' })).toThrow(/UID2:integ/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('asks for a client or credentials', async () => {
    await expect(collect(mapRows([], { columns: [{ index: 0, kind: 'email' }] }))).rejects.toThrow(/options.client/);
  });
});
