/** The due walk of a PostgreSQL state: id order over the primary key, range by range, and resumed after a kill. */
import postgres from 'postgres';
import { afterAll, describe, expect, it } from 'vitest';
import type { StateBackend } from '../../src/state/backend.js';
import { openPostgresState } from '../../src/state/postgres/open.js';
import { DUE_RANGE } from '../../src/state/postgres/store.js';
import type { DueEntry, EntryUpdate } from '../../src/state/types.js';
import { usePostgres } from '../helpers/postgres.js';

const ENV = 'http://127.0.0.1:1/|uid2';
const NOW = 1_000_000;
const pg = usePostgres();
let admin: postgres.Sql | undefined;
afterAll(async () => {
  await admin?.end();
});

const mapped = (hash: string, r: number | null): EntryUpdate => ({
  type: 'email',
  hash,
  outcome: { kind: 'mapped', u: `u-${hash}`, p: null, r, bucketId: null },
});

/** A fresh state, and a way to give the next entry committed a chosen id. */
async function withState(fn: (s: StateBackend, nextId: (id: number) => Promise<void>) => Promise<void>) {
  const url = pg.schemaUrl();
  const schema = new URL(url).searchParams.get('schema') as string;
  admin ??= postgres(pg.server().url, { max: 1, onnotice: () => {} });
  const sql = admin;
  const s = await openPostgresState(url, { envFingerprint: ENV });
  try {
    await fn(s, async (id) => {
      await sql.unsafe(`SELECT setval('${schema}.entries_id_seq', $1::int8, false)`, [id]);
    });
  } finally {
    await s.close();
  }
}

/** Every due entry at `nowS`, page after page of `limit`, as the remap engine asks for them. */
async function walk(s: StateBackend, nowS: number, limit: number, after: DueEntry | null = null): Promise<DueEntry[]> {
  const all: DueEntry[] = [];
  for (let page = await s.selectDue(nowS, after, limit); page.length > 0; ) {
    all.push(...page);
    if (page.length < limit) break;
    page = await s.selectDue(nowS, page[page.length - 1], limit);
  }
  return all;
}

describe('PostgreSQL state: the due walk', () => {
  it('finds due entries at the edges of its id ranges, in id order, whatever the page size', async () => {
    await withState(async (s, nextId) => {
      // [id, r]: the last id of the first range and the first of the next, one not due on an edge, and the last id
      const placed: [number, number | null][] = [
        [1, NOW - 1],
        [2, NOW + 1],
        [DUE_RANGE, NOW],
        [DUE_RANGE + 1, NOW - 86_400],
        [2 * DUE_RANGE, NOW + 5],
        [2 * DUE_RANGE + 1, NOW - 2],
        [2 * DUE_RANGE + 2, null],
        [3 * DUE_RANGE + 7, NOW - 3],
      ];
      for (const [id, r] of placed) {
        await nextId(id);
        await s.commitBatch([mapped(`h${id}`, r)], NOW - 86_400);
      }
      const dueIds = placed.filter(([, r]) => r !== null && r <= NOW).map(([id]) => id);
      expect(dueIds).toEqual([1, DUE_RANGE, DUE_RANGE + 1, 2 * DUE_RANGE + 1, 3 * DUE_RANGE + 7]);
      for (const limit of [1, 2, 3, 5, 100]) {
        const got = await walk(s, NOW, limit);
        expect(got.map((d) => d.id)).toEqual(dueIds);
      }
      const got = await walk(s, NOW, 100);
      expect(got.map((d) => [d.hash, d.u, d.r])).toEqual(
        dueIds.map((id) => [`h${id}`, `u-h${id}`, placed.find(([i]) => i === id)?.[1]]),
      );
      // from the middle of a range
      expect((await s.selectDue(NOW, { r: null, id: DUE_RANGE }, 10)).map((d) => d.id)).toEqual(dueIds.slice(2));
      // past the last id
      expect(await s.selectDue(NOW, { r: null, id: 3 * DUE_RANGE + 7 }, 10)).toEqual([]);
      // the counts say what the walk finds
      expect(await s.countDue(NOW)).toBe(dueIds.length);
    });
  });

  it('finds nothing when nothing is due, and every entry with an r when all are', async () => {
    await withState(async (s, nextId) => {
      expect(await walk(s, NOW, 10)).toEqual([]);
      const updates: EntryUpdate[] = [];
      for (let i = 0; i < 30; i++) updates.push(mapped(`k${String(i).padStart(2, '0')}`, i === 7 ? null : NOW + i));
      await s.commitBatch(updates.slice(0, 15), NOW);
      // a gap of more than a range between ids
      await nextId(5 * DUE_RANGE);
      await s.commitBatch(updates.slice(15), NOW);
      expect(await walk(s, NOW - 1, 4)).toEqual([]);
      expect(await s.countDue(NOW - 1)).toBe(0);
      const all = await walk(s, NOW + 30, 4);
      expect(all).toHaveLength(29);
      expect(all.map((d) => d.hash).sort()).toEqual(
        updates
          .filter((_, i) => i !== 7)
          .map((u) => u.hash)
          .sort(),
      );
      for (let i = 1; i < all.length; i++) expect(all[i].id).toBeGreaterThan(all[i - 1].id);
      expect(all.at(-1)?.id).toBeGreaterThanOrEqual(5 * DUE_RANGE);
    });
  });

  it('resumes after a kill between pages: what was committed is not due again, the rest is found once', async () => {
    const url = pg.schemaUrl();
    const first = await openPostgresState(url, { envFingerprint: ENV });
    const updates: EntryUpdate[] = [];
    for (let i = 0; i < 20; i++) updates.push(mapped(`e${String(i).padStart(2, '0')}`, NOW - (i % 4)));
    await first.commitBatch(updates, NOW - 86_400);
    const dueIds = (await walk(first, NOW, 100)).map((d) => d.id);
    expect(dueIds).toHaveLength(20);
    const page1 = await first.selectDue(NOW, null, 6);
    const page2 = await first.selectDue(NOW, page1[5], 6);
    expect([...page1, ...page2].map((d) => d.id)).toEqual(dueIds.slice(0, 12));
    // the first page answered and committed (a new r a year on); the second selected, never committed
    await first.commitBatch(
      page1.map((d) => ({
        type: d.type,
        hash: d.hash,
        outcome: { kind: 'mapped', u: `new-${d.hash}`, p: d.u, r: NOW + 365 * 86_400, bucketId: null },
      })),
      NOW,
    );
    // killed: its session ends without a word
    await first.close();
    const again = await openPostgresState(url, { envFingerprint: ENV });
    try {
      const rest = await walk(again, NOW, 5);
      expect(rest.map((d) => d.id)).toEqual(dueIds.slice(6));
      expect(await again.countDue(NOW)).toBe(14);
    } finally {
      await again.close();
    }
  });
});
