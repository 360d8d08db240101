import { afterAll, describe, expect, it } from 'vitest';
import type { OptoutCandidate, OptoutCursor, StateStore } from '../../src/state/index.js';
import { b64, tmpStates } from './tmp-state.js';

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

describe('opt-out sweep', () => {
  it('goes never-checked first (by id), then least recently checked, ties by id, each entry once', () => {
    const s = t.open(t.file());
    seed(s, 1_000);
    const ids = walk(s, 1_000).map((c) => c.id);
    // checks at three times, with many ties
    s.recordOptoutChecks(ids.slice(0, 300), 5_000);
    s.recordOptoutChecks(ids.slice(300, 500), 4_000);
    s.recordOptoutChecks(ids.slice(500, 600), 5_000);
    // 400 never checked
    for (const pageSize of [1, 37, 1_000, 5_000]) {
      const walked = walk(s, pageSize);
      expect(
        walked.map((c) => c.id),
        `page ${pageSize}`,
      ).toEqual([...ids.slice(600), ...ids.slice(300, 500), ...ids.slice(0, 300), ...ids.slice(500, 600)]);
    }
    const first = s.selectForOptoutCheck(1, null)[0];
    expect(first).toEqual({
      id: ids[600],
      type: 'email',
      hash: b64('h600'),
      u: b64('u600'),
      p: b64('p600'),
      lastOptoutCheckS: null,
    });
  });

  it('sizes a sweep as a fraction of the entries with a raw UID, rounded up', () => {
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
    expect(s.sweepSize(0.05)).toBe(5);
    expect(s.sweepSize(0.051)).toBe(6);
    expect(s.sweepSize(1)).toBe(100);
    expect(s.sweepSize(0)).toBe(0);
  });

  it('a nightly sweep of a fraction covers everything, then starts again with the oldest checks', () => {
    const s = t.open(t.file());
    seed(s, 100);
    const seen = new Map<number, number>();
    for (let night = 0; night < 5; night++) {
      const page = s.selectForOptoutCheck(s.sweepSize(0.2), null);
      for (const c of page) seen.set(c.id, (seen.get(c.id) ?? 0) + 1);
      s.recordOptoutChecks(
        page.map((c) => c.id),
        10_000 + night * 86_400,
      );
    }
    expect(seen.size).toBe(100);
    expect([...seen.values()].every((n) => n === 1)).toBe(true);
    const sixth = s.selectForOptoutCheck(20, null);
    expect(sixth.every((c) => c.lastOptoutCheckS === 10_000)).toBe(true);
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
    const found = s.lookupHashes('email', [b64('h3'), b64('h8'), b64('h9')]);
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
    const found = s.lookupHashes('email', [b64('h5'), b64('h12'), b64('h13')]);
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
    expect(s.counts()).toEqual({ entries: 40, mapped: 37, optout: 3, invalid: 0 });
  });
});
