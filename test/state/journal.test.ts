import Database from '../helpers/sqlite-driver.js';
import { afterAll, describe, expect, it } from 'vitest';
import { SCHEMA_VERSION, type EntryUpdate } from '../../src/state/index.js';
import { buildLegacyState } from './legacy-state.js';
import { ENV, b64, tmpStates } from './tmp-state.js';

const t = tmpStates('uid2-journal-');
afterAll(() => t.cleanup());

const mapped = (label: string, r = 5_000): EntryUpdate => ({
  type: 'email',
  hash: b64(label),
  outcome: { kind: 'mapped', u: b64(`u-${label}`), p: null, r },
});

/** A file as uid2-batch schema 1 left it: no pending_changes table, schema_version 1. */
function v1File(): string {
  const path = t.file();
  buildLegacyState(path, 1, ENV, (w) => w.commit([mapped('old')], 1_000));
  return path;
}

function hasJournalTable(path: string): boolean {
  const raw = new Database(path, { readonly: true });
  try {
    return raw.prepare("SELECT count(*) FROM sqlite_schema WHERE name = 'pending_changes'").pluck().get() === 1;
  } finally {
    raw.close();
  }
}

describe('schema migration to the pending changes journal', () => {
  it('a v1 file gets the table on a writing open, keeps its entries, and records the new version', () => {
    expect(SCHEMA_VERSION).toBe(6);
    const path = v1File();
    expect(hasJournalTable(path)).toBe(false);
    const s = t.open(path);
    expect(s.meta().schemaVersion).toBe(6);
    expect(s.lookupHashes('email', [b64('old')]).get(b64('old'))?.u).toBe(b64('u-old'));
    expect(s.pendingChanges('remap')).toEqual([]);
    s.commitBatch([mapped('new')], 2_000, { runId: 1, kind: 'remap', rows: ['{"n":1}'] });
    expect(s.pendingChanges('remap').map((c) => c.row)).toEqual(['{"n":1}']);
    s.close();
    expect(hasJournalTable(path)).toBe(true);
  });

  it('a read-only open (a dry run) of a v1 file asks for a writing run first and leaves the file as it was', () => {
    const path = v1File();
    expect(() => t.open(path, { readonly: true })).toThrow(
      /has schema 1 and needs an upgrade to 6; run once without --dry-run/,
    );
    expect(hasJournalTable(path)).toBe(false);
  });
});

describe('pending changes', () => {
  it('are inserted with the batch commit, in id order by kind, and deleted up to an id by ackChanges', () => {
    const s = t.open(t.file());
    s.commitBatch([mapped('a')], 1_000, { runId: 7, kind: 'remap', rows: ['r1', 'r2'] });
    s.commitBatch([mapped('b')], 1_000, { runId: 7, kind: 'remap', rows: ['r3'] });
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
    expect(() => s.commitBatch(bad, 1, { runId: 1, kind: 'remap', rows: ['lost?'] })).toThrow();
    expect(s.counts().entries).toBe(0);
    expect(s.pendingChanges('remap')).toEqual([]);
    expect(s.lastPendingChangeId('remap')).toBeNull();
  });

  it('opt-out rows are journaled with the tombstones, and not when the tombstoning fails', () => {
    const s = t.open(t.file());
    s.commitBatch([mapped('x'), mapped('y')], 1_000);
    const ids = [...s.lookupHashes('email', [b64('x'), b64('y')]).values()].map((e) => e.id);
    const tombstoned = s.tombstoneByRawUid([{ rawUid: b64('u-x'), optedOutSinceMs: 5 }], 2_000, ids, {
      runId: 2,
      kind: 'optout',
      rows: ['x-out'],
    });
    expect(tombstoned).toBe(1);
    expect(s.pendingChanges('optout').map((c) => c.row)).toEqual(['x-out']);
    // a row the journal refuses (NOT NULL) rolls the tombstone back with it
    const refused = { runId: 2, kind: 'optout' as const, rows: [null as unknown as string] };
    expect(() => s.tombstoneByRawUid([{ rawUid: b64('u-y'), optedOutSinceMs: 6 }], 2_000, ids, refused)).toThrow();
    expect(s.lookupHashes('email', [b64('y')]).get(b64('y'))?.status).toBe('mapped');
    expect(s.pendingChanges('optout').map((c) => c.row)).toEqual(['x-out']);
  });
});
