import Database from '../helpers/sqlite-driver.js';
import { afterAll, describe, expect, it } from 'vitest';
import { StateDamagedError, type EntryUpdate } from '../../src/state/index.js';
import { b64, tmpStates } from './tmp-state.js';
import { countsOf, lookupHashes } from './lookups.js';

const t = tmpStates('uid2-journal-');
afterAll(() => t.cleanup());

const mapped = (label: string, r = 5_000): EntryUpdate => ({
  type: 'email',
  hash: b64(label),
  outcome: { kind: 'mapped', u: b64(`u-${label}`), p: null, r },
});

describe('pending changes', () => {
  it('are inserted with the batch commit, in id order by kind, and deleted up to an id by ackChanges', () => {
    const s = t.open(t.file());
    s.commitBatch([mapped('a')], 1_000, { runId: 7, channel: 'remap', rows: ['r1', 'r2'] });
    s.commitBatch([mapped('b')], 1_000, { runId: 7, channel: 'remap', rows: ['r3'] });
    const remap = s.pendingChanges('remap');
    expect(remap.map((c) => c.row)).toEqual(['r1', 'r2', 'r3']);
    expect(s.pendingChanges('optout')).toEqual([]);
    expect(s.lastPendingChangeId('remap')).toBe(remap[2].id);
    expect(s.lastPendingChangeId('optout')).toBeNull();
    // paged
    expect(s.pendingChanges('remap', remap[0].id, 1).map((c) => c.row)).toEqual(['r2']);
    expect(s.ackChanges('remap', remap[1].id)).toBe(2);
    expect(s.pendingChanges('remap').map((c) => c.row)).toEqual(['r3']);
  });

  it('a commit that fails leaves neither its entries nor its change rows', () => {
    const s = t.open(t.file());
    const bad = [mapped('ok'), { type: 'email', hash: null, outcome: { kind: 'invalid' } }] as unknown as EntryUpdate[];
    expect(() => s.commitBatch(bad, 1, { runId: 1, channel: 'remap', rows: ['lost?'] })).toThrow();
    expect(countsOf(s).entries).toBe(0);
    expect(s.pendingChanges('remap')).toEqual([]);
    expect(s.lastPendingChangeId('remap')).toBeNull();
  });

  it('opt-out rows are journaled with the tombstones, and not when the tombstoning fails', () => {
    const s = t.open(t.file());
    s.commitBatch([mapped('x'), mapped('y')], 1_000);
    const ids = [...lookupHashes(s, 'email', [b64('x'), b64('y')]).values()].map((e) => e.id);
    const tombstoned = s.tombstoneByRawUid([{ rawUid: b64('u-x'), optedOutSinceMs: 5 }], 2_000, ids, {
      runId: 2,
      channel: 'optout',
      rows: ['x-out'],
    });
    expect(tombstoned).toBe(1);
    expect(s.pendingChanges('optout').map((c) => c.row)).toEqual(['x-out']);
    // a row the journal refuses (NOT NULL) rolls the tombstone back with it
    const refused = { runId: 2, channel: 'optout' as const, rows: [null as unknown as string] };
    expect(() => s.tombstoneByRawUid([{ rawUid: b64('u-y'), optedOutSinceMs: 6 }], 2_000, ids, refused)).toThrow();
    expect(lookupHashes(s, 'email', [b64('y')]).get(b64('y'))?.status).toBe('mapped');
    expect(s.pendingChanges('optout').map((c) => c.row)).toEqual(['x-out']);
  });
});

describe('a damaged change row', () => {
  it('stops the read of the journal with the damage, never hands on a changed row', () => {
    const path = t.file();
    const s = t.open(path);
    s.commitBatch([mapped('a')], 1_000, { runId: 7, channel: 'remap', rows: ['{"raw_uid":"AAAA"}'] });
    s.close();
    const raw = new Database(path);
    raw.prepare('UPDATE pending_changes SET row = ?').run('{"raw_uid":"AAAB"}');
    raw.close();
    const again = t.open(path);
    expect(() => again.pendingChanges('remap')).toThrow(StateDamagedError);
    expect(() => again.pendingChanges('remap')).toThrow(/is damaged \(a pending change row fails its checksum\)/);
  });
});
