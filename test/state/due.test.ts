import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Database from '../helpers/sqlite-driver.js';
import type { DueCursor, DueEntry, EntryUpdate, StateStore } from '../../src/state/index.js';
import { decodeIds } from '../../src/state/id-lists.js';
import { SQL } from '../../src/state/queries.js';
import { b64, tmpStates } from './tmp-state.js';
import { lookupHashes } from './lookups.js';

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

  it('pages through exactly the entries with r <= now, in (UTC day of r, id) order, once each, whatever the page size', () => {
    const now = MIDNIGHT + 4 * DAY + 60;
    const expected = [...expectedR.entries()].filter(([, r]) => r <= now);
    for (const pageSize of [1, 7, 450, 5_000]) {
      const walked = walkDue(s, now, pageSize);
      expect(walked.length, `page ${pageSize}`).toBe(expected.length);
      expect(new Set(walked.map((e) => e.id)).size).toBe(walked.length);
      for (let i = 1; i < walked.length; i++) {
        const a = walked[i - 1];
        const b = walked[i];
        const [dayA, dayB] = [Math.floor(a.r! / DAY), Math.floor(b.r! / DAY)];
        expect(dayA < dayB || (dayA === dayB && a.id < b.id), `order at ${i}`).toBe(true);
      }
      for (const e of walked) expect(e.r).toBe(expectedR.get(e.hash));
    }
    expect(s.countDue(now)).toBe(expected.length);
  });

  it('resumes after a cursor in the middle of a day', () => {
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

  it('reads the due lists and entries by their keys: no scan of a table, no sort', () => {
    const raw = new Database(s.path, { readonly: true });
    try {
      const plan = (sql: string, ...params: (number | string)[]) =>
        (raw.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as { detail: string }[])
          .map((r) => r.detail)
          .join(' | ');
      for (const [sql, params] of [
        [SQL.dueListNextDay, [1, 1]],
        [SQL.dueListPieces, [1]],
        [SQL.dueListLastPiece, [1]],
        [SQL.deleteDueListPieces, [1, 1]],
      ] as const) {
        const p = plan(sql, ...params);
        expect(p, sql).toMatch(/^SEARCH due_lists USING PRIMARY KEY/);
        expect(p, sql).not.toMatch(/SCAN|TEMP B-TREE/);
      }
      // listed ids: the JSON array walked in its order, each entry read by rowid
      for (const sql of [SQL.listedRecords, SQL.listedRecordRows]) {
        expect(plan(sql, '[1]'), sql).toMatch(
          /^SCAN j VIRTUAL TABLE .* \| SEARCH e USING INTEGER PRIMARY KEY \(rowid=\?\)$/,
        );
      }
    } finally {
      raw.close();
    }
  });
});

/** The ids on each day's due list of a file, as it holds them (stale ones included). */
function listedIds(path: string): Map<number, number[]> {
  const raw = new Database(path, { readonly: true });
  try {
    const byDay = new Map<number, number[]>();
    for (const [day, ids] of raw.prepare('SELECT day, ids FROM due_lists ORDER BY day, piece').raw().all() as [
      number,
      Buffer,
    ][]) {
      const list = byDay.get(day) ?? [];
      decodeIds(ids, (id) => list.push(id));
      byDay.set(day, list);
    }
    return byDay;
  } finally {
    raw.close();
  }
}

function mapped(label: string, r: number): EntryUpdate {
  return { type: 'email', hash: b64(label), outcome: { kind: 'mapped', u: b64(`u-${label}`), p: null, r } };
}

describe('v3 due lists: entries mapped again, stale ids, rewrites', () => {
  it('keeps each page in order while the walker commits new r for the entries it was given and for others', () => {
    const s = t.open(t.file());
    // 2,000 entries due over three days, in commits of 100 (many pieces per day)
    for (let c = 0; c < 20; c++) {
      s.commitBatch(
        Array.from({ length: 100 }, (_, i) => mapped(`w${c * 100 + i}`, MIDNIGHT + ((c * 100 + i) % 3) * DAY)),
        MIDNIGHT - DAY,
      );
    }
    const now = MIDNIGHT + 2 * DAY + 10;
    const expected = walkDue(s, now, 5_000);
    expect(expected.length).toBe(2_000);
    // entries not walked yet, mapped again to a later day before the walk reaches them: they are no longer due
    const movedAhead = new Set(expected.filter((_, i) => i % 10 === 5).map((e) => e.hash));
    const seen: DueEntry[] = [];
    let cursor: DueCursor | null = null;
    let first = true;
    for (;;) {
      const page = s.selectDue(now, cursor, 37);
      seen.push(...page);
      // as remap-due does: the page's entries get an r in the future; some of them back on a day already walked
      const updates = page.map((e, i) => mapped(labelOf(e.hash), i % 5 === 0 ? MIDNIGHT + 5 : MIDNIGHT + 40 * DAY));
      if (first) {
        updates.push(...[...movedAhead].map((hash) => mapped(labelOf(hash), MIDNIGHT + 30 * DAY)));
        first = false;
      }
      s.commitBatch(updates, now);
      if (page.length < 37) break;
      cursor = page[page.length - 1];
    }
    const ids = seen.map((e) => e.id);
    // those put back on an earlier day than the cursor's are not walked again; nothing is given twice
    expect(new Set(ids).size).toBe(ids.length);
    const firstPage = new Set(expected.slice(0, 37).map((e) => e.hash));
    const want = expected.filter((e) => firstPage.has(e.hash) || !movedAhead.has(e.hash)).map((e) => e.id);
    expect(ids).toEqual(want);
  });

  it('skips stale ids in counts and pages, and lists an entry mapped back to its old day once', () => {
    const s = t.open(t.file());
    s.commitBatch(
      Array.from({ length: 60 }, (_, i) => mapped(`st${i}`, MIDNIGHT + (i % 2) * DAY)),
      MIDNIGHT - DAY,
    );
    // 0..19 leave for a later day; 0..9 of them come back to their first day
    s.commitBatch(
      Array.from({ length: 20 }, (_, i) => mapped(`st${i}`, MIDNIGHT + 9 * DAY)),
      MIDNIGHT,
    );
    s.commitBatch(
      Array.from({ length: 10 }, (_, i) => mapped(`st${i}`, MIDNIGHT + (i % 2) * DAY + 60)),
      MIDNIGHT,
    );
    const now = MIDNIGHT + DAY + 60;
    const walked = walkDue(s, now, 4);
    expect(walked.map((e) => labelOf(e.hash)).sort()).toEqual(
      Array.from({ length: 60 }, (_, i) => `st${i}`)
        .filter((_, i) => i < 10 || i >= 20)
        .sort(),
    );
    expect(new Set(walked.map((e) => e.id)).size).toBe(walked.length);
    expect(s.countDue(now)).toBe(50);
    // by day after MIDNIGHT: the 20 left at it, then those up to a day after (one r is a minute after midnight)
    expect(s.dueByDay(MIDNIGHT, 10).map((d) => d.count)).toEqual([20, 25, 5, 0, 0, 0, 0, 0, 0, 10]);
  });

  it('rewrites a mostly stale day or one in many pieces, keeping every live id; a read-only store only counts', () => {
    const path = t.file();
    const s = t.open(path);
    for (let c = 0; c < 80; c++) {
      s.commitBatch(
        Array.from({ length: 10 }, (_, i) => mapped(`cp${c * 10 + i}`, MIDNIGHT)),
        MIDNIGHT - DAY,
      );
    }
    const day = Math.floor(MIDNIGHT / DAY);
    const later = day + 20;
    // 600 of the 800 leave for a later day
    s.commitBatch(
      Array.from({ length: 600 }, (_, i) => mapped(`cp${i + 200}`, MIDNIGHT + 20 * DAY)),
      MIDNIGHT,
    );
    const liveIds = walkDue(s, MIDNIGHT, 1_000).map((e) => e.id);
    expect(liveIds.length).toBe(200);
    expect(listedIds(path).get(day)?.length).toBe(800);

    const ro = t.open(path, { readonly: true });
    expect(ro.countDue(MIDNIGHT)).toBe(200);
    expect(listedIds(path).get(day)?.length).toBe(800);
    ro.close();

    expect(s.countDue(MIDNIGHT)).toBe(200);
    const lists = listedIds(path);
    expect(lists.get(day)).toEqual(liveIds);
    // the later day was not read (it is not due yet): its list is as the commit wrote it
    expect(lists.get(later)?.length).toBe(600);
    expect(walkDue(s, MIDNIGHT, 33).map((e) => e.id)).toEqual(liveIds);
    // in many pieces, all live: merged into one, every id kept
    expect(s.countDue(MIDNIGHT + 20 * DAY)).toBe(800);
    expect(listedIds(path).get(later)?.length).toBe(600);
    const raw = new Database(path, { readonly: true });
    try {
      expect(raw.prepare('SELECT count(*) FROM due_lists WHERE day = ?').pluck().get(day)).toBe(1);
    } finally {
      raw.close();
    }
  });
});

/** The label a test hashed with b64 (the hashes of this file are of `st`, `w` and `cp` labels). */
const labels = new Map<string, string>();
for (const prefix of ['st', 'w', 'cp'])
  for (let i = 0; i < 2_000; i++) labels.set(b64(`${prefix}${i}`), `${prefix}${i}`);
function labelOf(hash: string): string {
  const label = labels.get(hash);
  if (label === undefined) throw new Error('a hash this test did not make');
  return label;
}

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
    const byHash = lookupHashes(
      s,
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
    expect(s.countDue(mappedAt)).toBe(0);

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

  it('marks every mapped entry due to start a migration, and a v3 remap puts the entry on a due list', () => {
    const s = t.open(t.file(), { api: 'v2' });
    s.commitBatch(
      [
        { type: 'email', hash: b64('m1'), outcome: { kind: 'mapped', u: b64('mu1'), p: null, r: null, bucketId: 'b' } },
        { type: 'phone', hash: b64('m2'), outcome: { kind: 'mapped', u: b64('mu2'), p: null, r: null, bucketId: 'b' } },
        { type: 'phone', hash: b64('m3'), outcome: { kind: 'optout' } },
      ],
      100,
    );
    expect(s.markBucketEntriesDue()).toBe(2);
    const [e] = s.selectDueV2(null, 1);
    s.commitBatch([{ type: e.type, hash: e.hash, outcome: { kind: 'mapped', u: e.u!, p: null, r: 5_000 } }], 200);
    expect(s.countDueV2()).toBe(1);
    expect(lookupHashes(s, e.type, [e.hash]).get(e.hash)).toMatchObject({ bucketId: null, r: 5_000, due: false });
    expect(s.countDue(5_000)).toBe(1);
  });
});
