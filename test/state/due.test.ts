import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Database from '../helpers/sqlite-driver.js';
import type { DueCursor, DueEntry, EntryUpdate, StateStore } from '../../src/state/index.js';
import { SQL, TEXT_OF_STORED } from '../../src/state/queries.js';
import { textOfStored } from '../../src/state/stored-bytes.js';
import { b64, tmpStates } from './tmp-state.js';

const t = tmpStates();
afterAll(() => t.cleanup());

const DAY = 86_400;
// 2025-03-10T00:00:00Z, a UTC midnight like every r the service returns
const MIDNIGHT = Date.UTC(2025, 2, 10) / 1000;

/** Walks selectDue page by page the way remap-due does: the last entry of a page is the next cursor. */
function walkDue(s: StateStore, nowS: number, pageSize: number): DueEntry[] {
  const all: DueEntry[] = [];
  let cursor: DueCursor | null = null;
  for (;;) {
    const page = s.selectDue(nowS, cursor, pageSize);
    all.push(...page);
    if (page.length < pageSize) return all;
    cursor = page[page.length - 1];
  }
}

describe('v3 due entries: selectDue, countDue, dueByDay', () => {
  let s: StateStore;
  const expectedR = new Map<string, number>();

  beforeAll(() => {
    s = t.open(t.file());
    const updates: EntryUpdate[] = [];
    // 3,000 mapped entries over 10 days, most r on a midnight (heavy ties), some in between;
    // then tombstones and invalids that must never come due
    for (let i = 0; i < 3_000; i++) {
      const r = i % 7 === 0 ? MIDNIGHT + (i % 10) * DAY + 3_600 : MIDNIGHT + (i % 10) * DAY;
      const hash = b64(`due-${i}`);
      expectedR.set(hash, r);
      updates.push({
        type: i % 2 ? 'phone' : 'email',
        hash,
        outcome: { kind: 'mapped', u: b64(`u-${i}`), p: null, r },
      });
    }
    for (let i = 0; i < 200; i++)
      updates.push({ type: 'email', hash: b64(`gone-${i}`), outcome: { kind: i % 2 ? 'optout' : 'invalid' } });
    // v2 entries carry no r
    updates.push({
      type: 'email',
      hash: b64('v2'),
      outcome: { kind: 'mapped', u: b64('u-v2'), p: null, r: null, bucketId: 'b' },
    });
    s.commitBatch(updates, MIDNIGHT - 400 * DAY);
  });

  it('pages through exactly the entries with r <= now, in (r, id) order, once each, whatever the page size', () => {
    const now = MIDNIGHT + 4 * DAY + 60;
    const expected = [...expectedR.entries()].filter(([, r]) => r <= now);
    for (const pageSize of [1, 7, 450, 5_000]) {
      const walked = walkDue(s, now, pageSize);
      expect(walked.length, `page ${pageSize}`).toBe(expected.length);
      expect(new Set(walked.map((e) => e.id)).size).toBe(walked.length);
      for (let i = 1; i < walked.length; i++) {
        const a = walked[i - 1];
        const b = walked[i];
        expect(a.r! < b.r! || (a.r === b.r && a.id < b.id), `order at ${i}`).toBe(true);
      }
      for (const e of walked) expect(e.r).toBe(expectedR.get(e.hash));
    }
    expect(s.countDue(now)).toBe(expected.length);
  });

  it('resumes after a cursor in the middle of a tie on r', () => {
    const now = MIDNIGHT + 2 * DAY;
    const all = walkDue(s, now, 10_000);
    const tieStart = all.findIndex((e) => e.r === MIDNIGHT + DAY);
    const cursor = all[tieStart + 17];
    expect(cursor.r).toBe(all[tieStart + 18].r);
    const rest = s.selectDue(now, cursor, 100_000);
    expect(rest.map((e) => e.id)).toEqual(all.slice(tieStart + 18).map((e) => e.id));
  });

  it('sees entries leave the due set once remapped with a later r, so a second walk the same day finds nothing', () => {
    const own = t.open(t.file());
    own.commitBatch(
      Array.from({ length: 50 }, (_, i) => ({
        type: 'email' as const,
        hash: b64(`x${i}`),
        outcome: { kind: 'mapped' as const, u: b64(`a${i}`), p: null, r: MIDNIGHT },
      })),
      MIDNIGHT - DAY,
    );
    const now = MIDNIGHT + 100;
    const page = own.selectDue(now, null, 20);
    own.commitBatch(
      page.map((e) => ({
        type: e.type,
        hash: e.hash,
        outcome: { kind: 'mapped' as const, u: e.u!, p: null, r: MIDNIGHT + 365 * DAY },
      })),
      now,
    );
    expect(own.countDue(now)).toBe(30);
    expect(walkDue(own, now, 7).map((e) => e.id)).not.toContain(page[0].id);
  });

  it('counts by UTC day: today is everything r <= now, then one day per 24 h after now', () => {
    const now = MIDNIGHT + 3 * DAY + 600;
    const days = s.dueByDay(now, 7);
    expect(days.map((d) => d.day)).toEqual([
      '2025-03-13',
      '2025-03-14',
      '2025-03-15',
      '2025-03-16',
      '2025-03-17',
      '2025-03-18',
      '2025-03-19',
    ]);
    const count = (lo: number, hi: number) => [...expectedR.values()].filter((r) => r > lo && r <= hi).length;
    expect(days[0].count).toBe(count(-Infinity, now));
    for (let i = 1; i < 7; i++) expect(days[i].count, `day ${i}`).toBe(count(now + (i - 1) * DAY, now + i * DAY));
    expect(days.every((d) => d.count > 0)).toBe(true);
    expect(s.dueByDay(now, 0)).toEqual([]);
  });

  it('uses the r index for every due query: no scan of the table, no sort', () => {
    const raw = new Database(s.path, { readonly: true });
    raw.function(TEXT_OF_STORED, { deterministic: true }, textOfStored);
    try {
      const plan = (sql: string, ...params: number[]) =>
        (raw.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as { detail: string }[])
          .map((r) => r.detail)
          .join(' | ');
      for (const [sql, params] of [
        [SQL.selectDueFirst, [1, 1]],
        [SQL.selectDueSameR, [1, 1, 1]],
        [SQL.selectDueLaterR, [1, 1, 1]],
        [SQL.countDue, [1]],
        [SQL.dueByDay, [1, 1, 1]],
      ] as const) {
        const p = plan(sql, ...params);
        expect(p, sql).toMatch(/^SEARCH entries USING (COVERING )?INDEX entries_by_r /);
        expect(p, sql).not.toMatch(/SCAN entries|TEMP B-TREE FOR ORDER BY/);
      }
      expect(plan(SQL.selectDueSameR, 1, 1, 1)).toContain('(r=? AND rowid>?)');
    } finally {
      raw.close();
    }
  });
});

describe('v2 entries: rotated buckets', () => {
  it('marks due exactly the entries of rotated buckets mapped before the rotation, and pages them by id', () => {
    const s = t.open(t.file(), { api: 'v2' });
    const mappedAt = 1_700_000_000;
    const v2 = (i: number, bucket: string): EntryUpdate => ({
      type: 'email',
      hash: b64(`v2-${i}`),
      outcome: { kind: 'mapped', u: b64(`v2u-${i}`), p: null, r: null, bucketId: bucket },
    });
    s.commitBatch(
      Array.from({ length: 300 }, (_, i) => v2(i, `b${i % 3}`)),
      mappedAt,
    );
    // b1 entries 1..100 mapped again later: after b1's rotation
    s.commitBatch([v2(1, 'b1'), v2(4, 'b1')], mappedAt + 1_000);
    s.commitBatch([{ type: 'email', hash: b64('v2-7'), outcome: { kind: 'optout' } }], mappedAt + 1_000);

    const marked = s.markBucketsRotated([
      { bucketId: 'b0', lastUpdatedMs: (mappedAt + 10) * 1000 },
      { bucketId: 'b1', lastUpdatedMs: (mappedAt + 500) * 1000 },
      // rotated before everything was mapped: nothing to do
      { bucketId: 'b2', lastUpdatedMs: (mappedAt - 10) * 1000 },
      { bucketId: 'unknown', lastUpdatedMs: (mappedAt + 10) * 1000 },
    ]);
    const expectedIds = new Set<number>();
    const byHash = s.lookupHashes(
      'email',
      Array.from({ length: 300 }, (_, i) => b64(`v2-${i}`)),
    );
    for (let i = 0; i < 300; i++) {
      const e = byHash.get(b64(`v2-${i}`))!;
      const due = (i % 3 === 0 || i % 3 === 1) && i !== 1 && i !== 4 && i !== 7;
      expect(e.due, `entry ${i}`).toBe(due);
      if (due) expectedIds.add(e.id);
    }
    expect(marked).toBe(expectedIds.size);
    expect(s.countDueV2()).toBe(expectedIds.size);
    // marking again marks nothing new
    expect(s.markBucketsRotated([{ bucketId: 'b0', lastUpdatedMs: (mappedAt + 10) * 1000 }])).toBe(0);

    const walked: number[] = [];
    let after: number | null = null;
    for (;;) {
      const page = s.selectDueV2(after, 33);
      walked.push(...page.map((e) => e.id));
      if (page.length < 33) break;
      after = page[page.length - 1].id;
    }
    expect(walked).toEqual([...expectedIds].sort((a, b) => a - b));
    expect(s.counts(mappedAt).due).toBe(expectedIds.size);

    // a remap clears the mark
    const first = s.selectDueV2(null, 1)[0];
    s.commitBatch(
      [
        {
          type: first.type,
          hash: first.hash,
          outcome: { kind: 'mapped', u: b64('new'), p: null, r: null, bucketId: 'b0' },
        },
      ],
      mappedAt + 2_000,
    );
    expect(s.countDueV2()).toBe(expectedIds.size - 1);
  });

  it('marks every mapped entry due to start a migration, and a v3 remap moves the entry to the r index', () => {
    const s = t.open(t.file(), { api: 'v2' });
    s.commitBatch(
      [
        { type: 'email', hash: b64('m1'), outcome: { kind: 'mapped', u: b64('mu1'), p: null, r: null, bucketId: 'b' } },
        { type: 'phone', hash: b64('m2'), outcome: { kind: 'mapped', u: b64('mu2'), p: null, r: null, bucketId: 'b' } },
        { type: 'phone', hash: b64('m3'), outcome: { kind: 'optout' } },
      ],
      100,
    );
    expect(s.markAllMappedDue()).toBe(2);
    const [e] = s.selectDueV2(null, 1);
    s.commitBatch([{ type: e.type, hash: e.hash, outcome: { kind: 'mapped', u: e.u!, p: null, r: 5_000 } }], 200);
    expect(s.countDueV2()).toBe(1);
    expect(s.lookupHashes(e.type, [e.hash]).get(e.hash)).toMatchObject({ bucketId: null, r: 5_000, due: false });
    expect(s.countDue(5_000)).toBe(1);
  });
});
