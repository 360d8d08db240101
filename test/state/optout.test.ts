import { afterAll, describe, expect, it } from 'vitest';
import Database from '../helpers/sqlite-driver.js';
import type { OptoutCandidate, OptoutCursor, StateStore } from '../../src/state/index.js';
import { SQL } from '../../src/state/queries.js';
import { b64, tmpStates } from './tmp-state.js';
import { countsOf, lookupHashes } from './lookups.js';

const t = tmpStates();
afterAll(() => t.cleanup());

function seed(s: StateStore, n: number): void {
  s.commitBatch(
    Array.from({ length: n }, (_, i) => ({
      type: 'email' as const,
      hash: b64(`h${i}`),
      outcome: { kind: 'mapped' as const, u: b64(`u${i}`), p: i % 4 === 0 ? b64(`p${i}`) : null, r: 9_999_999 },
    })),
    1_000,
  );
}

function seed2(s: StateStore): void {
  s.commitBatch(
    [{ type: 'email', hash: b64('later'), outcome: { kind: 'mapped', u: b64('ulater'), p: null, r: 9_999_999 } }],
    3_000,
  );
}

function walk(s: StateStore, pageSize: number): OptoutCandidate[] {
  const all: OptoutCandidate[] = [];
  let cursor: OptoutCursor | null = null;
  for (;;) {
    const page = s.selectForOptoutCheck(pageSize, cursor);
    all.push(...page);
    if (page.length < pageSize) return all;
    cursor = page[page.length - 1];
  }
}

/** One night of a fraction: after the saved cursor to the end, then from the first entry, then the cursor moves. */
function night(s: StateStore, n: number, nowS: number): OptoutCandidate[] {
  const start = s.sweepCursor().id;
  const page = s.selectForOptoutCheck(n, { id: start });
  page.push(...s.selectForOptoutCheck(n - page.length, null, start));
  s.recordOptoutChecks(
    page.map((c) => c.id),
    nowS,
    page.at(-1),
  );
  return page;
}

describe('opt-out sweep', () => {
  it('walks the entries with a raw UID in id order, after a cursor and up to a bound, each once', () => {
    const s = t.open(t.file());
    seed(s, 1_000);
    const ids = walk(s, 1_000).map((c) => c.id);
    expect(ids.length).toBe(1_000);
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    // check times do not change the order
    s.recordOptoutChecks(ids.slice(0, 300), 5_000);
    s.recordOptoutChecks(ids.slice(500, 600), 4_000);
    for (const pageSize of [1, 37, 1_000, 5_000]) expect(walk(s, pageSize).map((c) => c.id)).toEqual(ids);
    expect(s.selectForOptoutCheck(3, { id: ids[599] }).map((c) => c.id)).toEqual(ids.slice(600, 603));
    expect(s.selectForOptoutCheck(10, { id: ids[10] }, ids[13]).map((c) => c.id)).toEqual(ids.slice(11, 14));
    expect(s.selectForOptoutCheck(10, { id: ids[999] })).toEqual([]);
    expect(s.selectForOptoutCheck(0, null)).toEqual([]);
    expect(s.selectForOptoutCheck(1, { id: ids[599] })[0]).toEqual({
      id: ids[600],
      type: 'email',
      hash: b64('h600'),
      u: b64('u600'),
      p: b64('p600'),
      lastOptoutCheckS: null,
    });
    expect(s.selectForOptoutCheck(1, { id: ids[499] })[0]?.lastOptoutCheckS).toBe(4_000);
  });

  it('skips entries without a raw UID: tombstones and invalids', () => {
    const s = t.open(t.file());
    seed(s, 10);
    s.commitBatch(
      [
        { type: 'email', hash: b64('h3'), outcome: { kind: 'optout' } },
        { type: 'phone', hash: b64('x'), outcome: { kind: 'invalid' } },
      ],
      2_000,
    );
    seed2(s);
    const walked = walk(s, 4);
    expect(walked.map((c) => c.hash)).toEqual([...[0, 1, 2, 4, 5, 6, 7, 8, 9].map((i) => b64(`h${i}`)), b64('later')]);
    expect(walked.every((c) => c.u !== null)).toBe(true);
  });

  it('keeps its cursor in the file, moved only with the checks it is recorded with', () => {
    const path = t.file();
    const s = t.open(path);
    seed(s, 20);
    expect(s.sweepCursor()).toEqual({ id: 0 });
    const ids = walk(s, 20).map((c) => c.id);
    s.recordOptoutChecks(ids.slice(0, 5), 1_000, { id: ids[4] });
    expect(s.sweepCursor()).toEqual({ id: ids[4] });
    // checks recorded without a cursor leave it where it was
    s.recordOptoutChecks(ids.slice(5, 8), 1_100);
    expect(s.sweepCursor()).toEqual({ id: ids[4] });
    s.close();
    const again = t.open(path);
    expect(again.sweepCursor()).toEqual({ id: ids[4] });
    expect(again.getMeta('sweep_after')).toBe(String(ids[4]));
    // the store's own bookkeeping: not for setMeta
    expect(() => again.setMeta('sweep_after', '1')).toThrow(/cannot be changed/);
    expect(again.sweepCursor()).toEqual({ id: ids[4] });
  });

  it('moves the cursor in the transaction of the checks: a failed write moves neither', () => {
    const path = t.file();
    const s = t.open(path);
    seed(s, 10);
    s.recordOptoutChecks([1, 2], 1_000, { id: 2 });
    s.close();
    const raw = new Database(path);
    raw.exec(
      "CREATE TRIGGER fail_check BEFORE UPDATE OF record ON entries WHEN NEW.id = 5 BEGIN SELECT RAISE(ABORT, 'write failed'); END",
    );
    raw.close();
    const again = t.open(path);
    expect(() => again.recordOptoutChecks([3, 4, 5], 2_000, { id: 5 })).toThrow(/write failed/);
    expect(again.sweepCursor()).toEqual({ id: 2 });
    expect(walk(again, 10).map((c) => c.lastOptoutCheckS)).toEqual([1_000, 1_000, ...Array(8).fill(null)]);
  });

  it('a read-only open sees the cursor and refuses to record', () => {
    const path = t.file();
    const s = t.open(path);
    seed(s, 3);
    s.recordOptoutChecks([1], 1_000, { id: 1 });
    s.close();
    const ro = t.open(path, { readonly: true });
    expect(ro.sweepCursor()).toEqual({ id: 1 });
    expect(() => ro.recordOptoutChecks([2], 2_000, { id: 2 })).toThrow();
    expect(ro.sweepCursor()).toEqual({ id: 1 });
  });

  it('counts the entries with a raw UID: opted-out and invalid ones have none', () => {
    const s = t.open(t.file());
    seed(s, 101);
    s.commitBatch(
      [
        { type: 'email', hash: b64('h0'), outcome: { kind: 'optout' } },
        { type: 'phone', hash: b64('x'), outcome: { kind: 'invalid' } },
      ],
      2_000,
    );
    expect(s.countWithRawUid()).toBe(100);
  });

  it('a nightly sweep of a fraction covers everything once per cycle, the oldest check first', () => {
    const s = t.open(t.file());
    seed(s, 100);
    const ids = walk(s, 100).map((c) => c.id);
    const order: number[] = [];
    // 0.3 does not divide the entries: nights cross the end of the table and wrap
    for (let n = 0; n < 10; n++)
      order.push(...night(s, Math.ceil(0.3 * s.countWithRawUid()), 10_000 + n * 86_400).map((c) => c.id));
    expect(order.length).toBe(300);
    // three cycles, each every entry once in id order
    for (let cycle = 0; cycle < 3; cycle++) expect(order.slice(cycle * 100, cycle * 100 + 100)).toEqual(ids);
    // the next entry is the one checked longest ago
    const next = [...s.selectForOptoutCheck(1, s.sweepCursor()), ...s.selectForOptoutCheck(1, null)][0];
    const oldest = Math.min(...walk(s, 100).map((c) => c.lastOptoutCheckS ?? 0));
    expect(next?.lastOptoutCheckS).toBe(oldest);
  });

  it('walks the table by ranges of its primary key: rows in key order, no sort', () => {
    const path = t.file();
    seed(t.open(path), 10);
    const raw = new Database(path);
    try {
      for (const sql of [SQL.recordRange, SQL.recordRangeRows]) {
        const plan = (raw.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(1, 5) as { detail: string }[])
          .map((r) => r.detail)
          .join(' | ');
        expect(plan, sql).toBe('SEARCH entries USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)');
      }
    } finally {
      raw.close();
    }
  });

  it('tombstones by current and by previous raw UID, reading only the rows sent', () => {
    const s = t.open(t.file());
    seed(s, 40);
    const page = s.selectForOptoutCheck(40, null);
    const changed = s.tombstoneByRawUid(
      [
        { rawUid: b64('u3'), optedOutSinceMs: 1_111_000 },
        { rawUid: b64('p8'), optedOutSinceMs: 2_222_000 },
        { rawUid: b64('not-stored'), optedOutSinceMs: 3_333_000 },
      ],
      7_000,
      page.map((c) => c.id),
    );
    expect(changed).toBe(2);
    const found = lookupHashes(s, 'email', [b64('h3'), b64('h8'), b64('h9')]);
    expect(found.get(b64('h3'))).toMatchObject({
      status: 'optout',
      u: null,
      p: null,
      r: null,
      optedOutSinceMs: 1_111_000,
      lastOptoutCheckS: 7_000,
    });
    expect(found.get(b64('h8'))).toMatchObject({
      status: 'optout',
      u: null,
      p: null,
      r: null,
      optedOutSinceMs: 2_222_000,
    });
    expect(found.get(b64('h9'))).toMatchObject({ status: 'mapped', u: b64('u9') });
    expect(s.countWithRawUid()).toBe(38);
    expect(s.countDue(99_999_999)).toBe(38);
  });

  it('with no rows given, finds the raw UIDs by one pass over the table', () => {
    const s = t.open(t.file());
    seed(s, 40);
    const changed = s.tombstoneByRawUid(
      [
        { rawUid: b64('u5'), optedOutSinceMs: 10_000 },
        { rawUid: b64('p12'), optedOutSinceMs: 20_000 },
      ],
      8_000,
    );
    expect(changed).toBe(2);
    const found = lookupHashes(s, 'email', [b64('h5'), b64('h12'), b64('h13')]);
    expect(found.get(b64('h5'))).toMatchObject({
      status: 'optout',
      u: null,
      optedOutSinceMs: 10_000,
      lastOptoutCheckS: 8_000,
    });
    expect(found.get(b64('h12'))).toMatchObject({ status: 'optout', p: null, optedOutSinceMs: 20_000 });
    expect(found.get(b64('h13'))?.status).toBe('mapped');
    // a second call with other raw UIDs does not reuse the first call's
    expect(s.tombstoneByRawUid([{ rawUid: b64('u20'), optedOutSinceMs: 1 }], 9_000)).toBe(1);
    expect(countsOf(s)).toEqual({ entries: 40, mapped: 37, optout: 3, invalid: 0 });
  });
});
