import { describe, expect, it } from 'vitest';
import type { StateBackend, StateLockScope } from '../../src/state/backend.js';
import { openPostgresState } from '../../src/state/postgres/open.js';
import { STATUS_CODE } from '../../src/state/schema.js';
import type { EntryUpdate } from '../../src/state/types.js';
import { usePostgres } from '../helpers/postgres.js';

const ENV = 'http://127.0.0.1:1/|uid2';
const pg = usePostgres();

async function withState<T>(fn: (s: StateBackend, url: string) => Promise<T>, url = pg.schemaUrl()): Promise<T> {
  const s = await openPostgresState(url, { envFingerprint: ENV });
  try {
    return await fn(s, url);
  } finally {
    await s.close();
  }
}

const mapped = (hash: string, u: string, r: number | null, bucketId: string | null = 'b1'): EntryUpdate => ({
  type: 'email',
  hash,
  outcome: { kind: 'mapped', u, p: null, r, bucketId },
});

describe('PostgreSQL state: open, meta, lookups and commits', () => {
  it('creates the schema on first use with its meta values, and reopens it', async () => {
    const url = pg.schemaUrl();
    await withState(async (s) => {
      expect(s.kind).toBe('postgres');
      expect(s.where).not.toContain(pg.server().password);
      const meta = await s.meta();
      expect(meta).toMatchObject({ schemaVersion: 5, envFingerprint: ENV, api: 'v3' });
      await s.setMeta('last_buckets_check', '123');
      await expect(s.setMeta('env_fingerprint', 'x')).rejects.toThrow(/cannot be changed/);
    }, url);
    await withState(async (s) => {
      expect(await s.getMeta('last_buckets_check')).toBe('123');
      expect(await s.getMeta('nothing')).toBeNull();
    }, url);
  });

  it('answers lookups with the columns the file gives, at the last position of a hash asked twice', async () => {
    await withState(async (s) => {
      await s.commitBatch(
        [
          mapped('h1', 'u1', 1000.5),
          mapped('h2', 'u2', null, null),
          { type: 'phone', hash: 'h1', outcome: { kind: 'invalid' } },
        ],
        50,
      );
      const got = await s.lookupStored('email', ['h1', 'zz', 'h2', 'h1']);
      const rows = [...got.at].map((at, i) => ({
        at,
        status: got.status[i],
        due: got.due[i],
        r: got.r[i],
        u: got.u[i],
        p: got.p[i],
        bucketId: got.bucketId[i],
      }));
      rows.sort((a, b) => a.at - b.at);
      expect(rows).toEqual([
        { at: 2, status: 1, due: 0, r: Number.NaN, u: 'u2', p: null, bucketId: null },
        { at: 3, status: 1, due: 0, r: 1000.5, u: 'u1', p: null, bucketId: 'b1' },
      ]);
      const phone = await s.lookupStored('phone', ['h1']);
      expect([...phone.status]).toEqual([3]);
    });
  });

  it('answers a lookup of thousands of keys, asked in parts, each stored key at its last position', async () => {
    await withState(async (s) => {
      const hash = (i: number) =>
        Buffer.alloc(32, 0)
          .fill(i & 255, 0, 1)
          .fill(i >> 8, 1, 2)
          .toString('base64');
      const stored: EntryUpdate[] = [];
      for (let i = 0; i < 3_000; i += 3) stored.push(mapped(hash(i), `u${i}`, i));
      await s.commitBatch(stored, 50);
      // every key once, then the first 50 again: a hash asked twice is answered at its last position
      const asked = Array.from({ length: 3_000 }, (_, i) => hash(i));
      for (let i = 0; i < 50; i++) asked.push(hash(i));
      const got = await s.lookupStored('email', asked);
      const found = new Map([...got.at].map((at, k) => [at, [got.u[k], got.r[k]]]));
      const want = new Map<number, [string, number]>();
      asked.forEach((h, at) => {
        const i = asked.indexOf(h);
        if (i % 3 === 0 && asked.lastIndexOf(h) === at) want.set(at, [`u${i}`, i]);
      });
      expect(want.size).toBe(1_000);
      expect(found).toEqual(want);
    });
  });

  it('keeps what an opt-out or invalid answer keeps of an earlier mapping', async () => {
    await withState(async (s) => {
      await s.commitBatch([mapped('a', 'ua', 500), mapped('b', 'ub', 600)], 10);
      await s.recordOptoutChecks([1], 20);
      await s.commitBatch(
        [
          { type: 'email', hash: 'a', outcome: { kind: 'optout', optedOutSinceMs: 7000 } },
          { type: 'email', hash: 'b', outcome: { kind: 'invalid' } },
        ],
        30,
      );
      const { records } = await s.readRecords(0, 10);
      expect(records).toEqual([
        {
          type: 'email',
          hash: 'a',
          status: 'optout',
          due: false,
          u: null,
          p: null,
          r: null,
          bucketId: null,
          lastMappedS: 10,
          lastOptoutCheckS: 20,
          optedOutSinceMs: 7000,
        },
        {
          type: 'email',
          hash: 'b',
          status: 'invalid',
          due: false,
          u: null,
          p: null,
          r: null,
          bucketId: null,
          lastMappedS: 10,
          lastOptoutCheckS: null,
          optedOutSinceMs: null,
        },
      ]);
      // an opt-out answer that does not say when keeps the time it had
      await s.commitBatch([{ type: 'email', hash: 'a', outcome: { kind: 'optout' } }], 40);
      expect((await s.readRecords(0, 1)).records[0].optedOutSinceMs).toBe(7000);
      // the same key twice in one batch: the later answer wins
      await s.commitBatch([mapped('c', 'u1', 1), mapped('c', 'u2', 2)], 50);
      expect((await s.readRecords(2, 10)).records.map((r) => [r.hash, r.u])).toEqual([['c', 'u2']]);
    });
  });

  it('journals change rows with the batch, lists, counts and acknowledges them', async () => {
    await withState(async (s) => {
      const runId = await s.startRun('remap-due', '{}', 100);
      await s.commitBatch([mapped('a', 'ua', 500)], 100, { runId, channel: 'remap', rows: ['{"x":1}', '{"x":2}'] });
      await s.commitBatch([], 100, { runId, channel: 'optout', rows: ['{"y":1}'] });
      const pending = await s.pendingChanges('remap');
      expect(pending.map((p) => p.row)).toEqual(['{"x":1}', '{"x":2}']);
      expect(await s.lastPendingChangeId('remap')).toBe(pending[1].id);
      expect(await s.pendingChangeCounts()).toEqual({ remap: 2, optout: 1 });
      expect(await s.ackChanges('remap', pending[0].id)).toBe(1);
      expect((await s.pendingChanges('remap', 0, 10)).map((p) => p.row)).toEqual(['{"x":2}']);
      await s.finishRun(runId, '{}', 0, 200);
      expect(await s.lastRun()).toMatchObject({ command: 'remap-due', nowS: 100, finishedAtS: 200, exitCode: 0 });
    });
  });

  it('lists due entries by day and in id pages, and tallies', async () => {
    await withState(async (s) => {
      const now = 1_000_000;
      // one commit each, so that ids follow this order while r does not
      for (const update of [
        mapped('c', 'u', now + 10),
        mapped('b', 'u', now),
        mapped('d', 'u', now + 86_400 + 1),
        mapped('a', 'u', now - 5),
        mapped('e', 'u', null),
      ])
        await s.commitBatch([update], now);
      expect(await s.countDue(now)).toBe(2);
      expect((await s.dueByDay(now, 3)).map((d) => d.count)).toEqual([2, 1, 1]);
      const first = await s.selectDue(now + 20, null, 2);
      expect(first.map((d) => d.hash)).toEqual(['c', 'b']);
      const next = await s.selectDue(now + 20, first[1], 10);
      expect(next.map((d) => d.hash)).toEqual(['a']);
      expect(await s.firstDueDay(now)).toBe(Math.floor((now + 10) / 86_400) * 86_400);
      expect(await s.firstDueDay(now + 86_400 + 1)).toBeNull();
      const t = await s.tally([now, now + 100]);
      expect(t).toEqual({ byStatus: { mapped: 5, optout: 0, invalid: 0 }, withoutR: 1, atMost: [2, 3] });
    });
  });

  it('sweeps entries with raw UIDs in id order, records checks and tombstones opted-out raw UIDs', async () => {
    await withState(async (s) => {
      await s.commitBatch(
        [mapped('a', 'ua', 1), { type: 'email', hash: 'b', outcome: { kind: 'invalid' } }, mapped('c', 'uc', 2)],
        5,
      );
      expect(await s.countWithRawUid()).toBe(2);
      expect(await s.sweepCursor()).toEqual({ id: 0 });
      const page = await s.selectForOptoutCheck(10, null);
      expect(page.map((c) => c.hash)).toEqual(['a', 'c']);
      await s.recordOptoutChecks([page[0].id], 60, { id: page[0].id });
      expect(await s.sweepCursor()).toEqual({ id: page[0].id });
      expect((await s.selectForOptoutCheck(10, { id: page[0].id })).map((c) => c.hash)).toEqual(['c']);
      const runId = await s.startRun('optout-check', '{}', 70);
      expect(
        await s.tombstoneByRawUid([{ rawUid: 'uc', optedOutSinceMs: 9 }], 70, undefined, {
          runId,
          channel: 'optout',
          rows: ['r'],
        }),
      ).toBe(1);
      expect(await s.tombstoneByRawUid([{ rawUid: 'ua', optedOutSinceMs: 9 }], 70, [page[1].id])).toBe(0);
      const c = (await s.readRecords(0, 10)).records.find((r) => r.hash === 'c');
      expect(c).toMatchObject({ status: 'optout', u: null, optedOutSinceMs: 9, lastOptoutCheckS: 70, lastMappedS: 5 });
      expect(await s.pendingChangeCounts()).toEqual({ optout: 1 });
    });
  });

  it('keeps hashes, raw UIDs and bucket ids of any shape as they were', async () => {
    // long enough that the server's base64 breaks lines, with what array literals and base64 would misread
    const odd = `"q\\{a,b}" NULL ${'é€😀'.repeat(30)}`;
    const b64 = Buffer.alloc(32, 3).toString('base64');
    const raw = Buffer.alloc(33, 5).toString('base64');
    await withState(async (s) => {
      await s.commitBatch(
        [
          { type: 'email', hash: odd, outcome: { kind: 'mapped', u: odd, p: raw, r: 7, bucketId: odd } },
          { type: 'phone', hash: b64, outcome: { kind: 'mapped', u: 'NULL', p: '', r: 8, bucketId: 'NULL' } },
          { type: 'email', hash: 'NULL', outcome: { kind: 'mapped', u: raw, p: null, r: 9, bucketId: null } },
        ],
        50,
      );
      // committed again: the stored ones are read back, answered and written by id
      await s.commitBatch([{ type: 'email', hash: odd, outcome: { kind: 'mapped', u: raw, p: odd, r: 10 } }], 60);
      const got = await s.lookupStored('email', [odd, 'NULL', b64]);
      const rows = [...got.at].map((at, i) => ({ at, u: got.u[i], p: got.p[i], bucketId: got.bucketId[i] }));
      rows.sort((a, b) => a.at - b.at);
      expect(rows).toEqual([
        { at: 0, u: raw, p: odd, bucketId: null },
        { at: 1, u: raw, p: null, bucketId: null },
      ]);
      const phone = await s.lookupStored('phone', [b64]);
      expect([phone.u[0], phone.p[0], phone.bucketId[0]]).toEqual(['NULL', '', 'NULL']);
      const out = [];
      for await (const e of s.entries()) out.push([e.type, e.hash, e.u, e.p]);
      expect(out).toEqual([
        // a batch's new entries are inserted in key order: by type, then hash
        ['email', odd, raw, odd],
        ['email', 'NULL', raw, null],
        ['phone', b64, 'NULL', ''],
      ]);
      expect(await s.tombstoneByRawUid([{ rawUid: 'NULL', optedOutSinceMs: 1 }], 70)).toBe(1);
      expect((await s.lookupStored('phone', [b64])).status[0]).toBe(STATUS_CODE.optout);
    });
  });

  it('reads back bucket ids holding what a lookup escapes, whether the hashes asked are base64 or not', async () => {
    const buckets = ['a\u0001b', '\\1', 'c\\', ',\\\u0001,', '', 'x,y', null];
    // hashes of the usual shape are sent as bytes, others as texts
    const base64 = buckets.map((_, i) => Buffer.alloc(32, i + 1).toString('base64'));
    const other = buckets.map((_, i) => `h${i}`);
    await withState(async (s) => {
      const hashes = [...base64, ...other];
      await s.commitBatch(
        hashes.map((h, i) => mapped(h, `u${i}`, i, buckets[i % buckets.length])),
        5,
      );
      for (const asked of [base64, other, [...other.slice(0, 3), ...base64.slice(3)]]) {
        const got = await s.lookupStored('email', asked);
        const byAt = [...got.at].map((at, i) => [at, got.bucketId[i]]).sort((a, b) => Number(a[0]) - Number(b[0]));
        expect(byAt).toEqual(buckets.map((b, i) => [i, b]));
      }
    });
  });

  it('finds hashes that are almost base64 beside base64 ones, and reads back any number and bucket id', async () => {
    const canonical = Buffer.alloc(32, 9).toString('base64');
    const hashes = [
      canonical,
      // 44 characters ending in one '=', but no canonical base64 of 32 bytes: each is kept as its text
      `${canonical.slice(0, 42)}B=`,
      `AB=${canonical.slice(3)}`,
      `${canonical.slice(0, 10)}-_${canonical.slice(12)}`,
      `${canonical.slice(0, 10)} ${canonical.slice(11)}`,
      Buffer.alloc(32, 10).toString('base64'),
    ];
    const numbers = [1000.5, -3, -0, 1e20, 2 ** 60, 0.1];
    const buckets = ['é€😀', 'x', null, '\\é', 'a,b', null];
    await withState(async (s) => {
      await s.commitBatch(
        hashes.map((h, i) => mapped(h, Buffer.alloc(32 + (i % 2), i).toString('base64'), numbers[i], buckets[i])),
        1_768_435_200.25,
      );
      const expected = (i: number) => [Buffer.alloc(32 + (i % 2), i).toString('base64'), numbers[i], buckets[i]];
      // each beside a base64 one, then all at once
      for (const asked of [...hashes.slice(1).map((h) => [hashes[0], h]), hashes]) {
        const got = await s.lookupStored('email', asked);
        const byAt = [...got.at].map((at, i) => [asked[at], got.u[i], got.r[i], got.bucketId[i]]);
        expect(byAt.sort()).toEqual(asked.map((h) => [h, ...expected(hashes.indexOf(h))]).sort());
      }
      expect(Object.is((await s.lookupStored('email', [hashes[2]])).r[0], -0)).toBe(true);
    });
  });

  it('exports entries in id order and copies records from one schema to another unchanged', async () => {
    const records = await withState(async (s) => {
      await s.commitBatch(
        [mapped('a', 'ua', 1), { type: 'phone', hash: 'b', outcome: { kind: 'optout', optedOutSinceMs: 3 } }],
        5,
      );
      const out = [];
      for await (const e of s.entries()) out.push(e);
      expect(out).toEqual([
        { type: 'email', hash: 'a', status: 'mapped', u: 'ua', p: null, r: 1 },
        { type: 'phone', hash: 'b', status: 'optout', u: null, p: null, r: null },
      ]);
      expect(s.damaged()).toBe(0);
      return (await s.readRecords(0, 100)).records;
    });
    await withState(async (s) => {
      await s.writeRecords(records);
      await s.writeRecords(records);
      expect((await s.readRecords(0, 100)).records).toEqual(records);
      expect((await s.selectDue(1, null, 10)).map((d) => [d.hash, d.r])).toEqual([['a', 1]]);
      // written again with other refresh times: what is due follows them, with no entry left due at its old r
      const moved = [
        { ...records[0], r: null },
        { ...records[1], status: 'mapped' as const, u: 'ub', r: 2 },
      ];
      await s.writeRecords(moved);
      expect((await s.readRecords(0, 100)).records).toEqual(moved);
      expect((await s.selectDue(2, null, 10)).map((d) => [d.hash, d.r])).toEqual([['b', 2]]);
      expect(await s.dueByDay(1, 2)).toMatchObject([{ count: 0 }, { count: 1 }]);
      expect(await s.tally([1, 2])).toMatchObject({ atMost: [0, 1] });
    });
  });

  it('refuses a second sweep of a share; shards of one N go side by side, and a whole sweep and a shard exclude each other', async () => {
    const url = pg.schemaUrl();
    const half = (index: number): StateLockScope => ({
      kind: 'sweep',
      command: 'remap-due',
      shard: { index, count: 2 },
    });
    await withState(async (a) => {
      await a.lock({ kind: 'sweep', command: 'remap-due' });
      await withState(async (b) => {
        await b.lock({ kind: 'map' });
        await expect(b.lock({ kind: 'sweep', command: 'remap-due' })).rejects.toMatchObject({
          name: 'StateLockedError',
        });
        await expect(b.lock(half(1))).rejects.toThrow(/doing remap-due \(shard all\) of /);
        await b.lock({ kind: 'sweep', command: 'optout-check', shard: { index: 1, count: 2 } });
      }, url);
    }, url);
    await withState(async (c) => {
      await withState(async (a) => {
        await a.lock(half(1));
        await withState(async (b) => {
          await expect(b.lock(half(1))).rejects.toThrow(/doing remap-due \(shard 0\/2\) of /);
          await b.lock(half(2));
          await expect(b.lock({ kind: 'sweep', command: 'remap-due' })).rejects.toThrow(
            /doing remap-due \(its shards\) of /,
          );
        }, url);
        await expect(c.lock(half(1))).rejects.toThrow(/\(shard 0\/2\)/);
      }, url);
      // the refused shard let go of the command's shared lock: with the shards gone, a whole sweep goes
      await withState(async (d) => d.lock({ kind: 'sweep', command: 'remap-due' }), url);
    }, url);
    // released with the session
    await withState(async (c) => c.lock({ kind: 'sweep', command: 'remap-due' }), url);
  });

  it('refuses a shard of another N while shards of one N run, naming both counts; the same N goes on', async () => {
    const url = pg.schemaUrl();
    const shard = (index: number, count: number, command = 'remap-due'): StateLockScope => ({
      kind: 'sweep',
      command,
      shard: { index, count },
    });
    await withState(async (a) => {
      await a.lock(shard(1, 3));
      await withState(async (b) => {
        await expect(b.lock(shard(2, 4))).rejects.toMatchObject({ name: 'StateLockedError' });
        await expect(b.lock(shard(1, 4))).rejects.toThrow(
          /remap-due --shard K\/4 .* --shard K\/3 .*; wait for those runners to finish, or use --shard K\/3/,
        );
        // another command's sweep, and a shard of the same N, go on beside it
        await b.lock(shard(1, 4, 'optout-check'));
        await b.lock(shard(2, 3));
      }, url);
      // the refused shards let go of what they took: a share of 3 that b held is free again
      await withState(async (c) => c.lock(shard(2, 3)), url);
    }, url);
    // with the shards of 3 gone, shards of 4 go
    await withState(async (d) => d.lock(shard(4, 4)), url);
  });
});
