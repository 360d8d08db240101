import type BetterSqlite3 from 'better-sqlite3';
import Database from '../helpers/sqlite-driver.js';
import { afterAll, describe, expect, it } from 'vitest';
import type { EntryUpdate } from '../../src/state/index.js';
import { KeyFilter } from '../../src/state/key-filter.js';
import { keyOf } from '../../src/state/lookup-key.js';
import { b64, tmpStates } from './tmp-state.js';

const t = tmpStates('uid2-filter-');
afterAll(() => t.cleanup());

const mapped = (label: string): EntryUpdate => ({
  type: 'email',
  hash: b64(label),
  outcome: { kind: 'mapped', u: b64(`u-${label}`), p: null, r: 100 },
});
const wanted = (labels: string[]) => labels.map((l) => ({ type: 'email' as const, hash: b64(l) }));
const labels = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

function meta(path: string, key: string): string | undefined {
  const db = new Database(path, { readonly: true });
  try {
    return db.prepare('SELECT value FROM meta WHERE key = ?').pluck().get(key) as string | undefined;
  } finally {
    db.close();
  }
}

/** Writes to the file with plain SQL, as another program (or an older uid2-batch) would. */
function withFile(path: string, fn: (db: BetterSqlite3.Database) => void): void {
  const db = new Database(path);
  try {
    fn(db);
  } finally {
    db.close();
  }
}

describe('the keys filter', () => {
  it('answers yes for every key added, and no for nearly every other key', () => {
    const f = KeyFilter.forCapacity(20_000);
    for (let i = 0; i < 20_000; i++) f.add(keyOf(i % 2, b64(`in-${i}`)));
    for (let i = 0; i < 20_000; i++) expect(f.mayHave(keyOf(i % 2, b64(`in-${i}`)))).toBe(true);
    let passed = 0;
    for (let i = 0; i < 20_000; i++) if (f.mayHave(keyOf(i % 2, b64(`out-${i}`)))) passed++;
    expect(passed).toBeLessThan(20_000 * 0.03);
    const copy = KeyFilter.fromPieces(f.blocks, f.count, [...f.pieces(1000)]);
    expect(copy?.words).toEqual(f.words);
    expect(KeyFilter.fromPieces(f.blocks + 1, f.count, [...f.pieces(1000)])).toBeNull();
  });

  it('is written with each merge and read by the next open, which trusts it to rule keys out', () => {
    const path = t.file();
    const s = t.open(path, { tailEntries: 100 });
    s.commitBatch(labels('a', 150).map(mapped), 1);
    expect(meta(path, 'filter_upto')).toBe('150');
    s.close();
    const again = t.open(path, { tailEntries: 100 });
    expect(again.lookupMany(wanted(labels('a', 150))).size).toBe(150);
    again.close();
    // an emptied filter rules every key out: the open store no longer finds merged entries, so it does consult it
    withFile(path, (db) => db.prepare('UPDATE key_filter SET bits = zeroblob(length(bits))').run());
    const emptied = t.open(path, { tailEntries: 100 });
    expect(emptied.lookupMany(wanted(labels('a', 150))).size).toBe(0);
  });

  it('is not used once a merge moved keys_upto without it, and is made again by the next merge', () => {
    const path = t.file();
    const s = t.open(path, { tailEntries: 100 });
    s.commitBatch(labels('b', 120).map(mapped), 1);
    s.close();
    // an older version appends an entry and merges it into keys_recent, leaving the filter as it was
    withFile(path, (db) => {
      const id = Number(
        db
          .prepare('INSERT INTO entries (type, hash, status, u, r, due) VALUES (0, ?, 1, ?, 100, 0)')
          .run(b64('old'), b64('u-old')).lastInsertRowid,
      );
      db.prepare('INSERT INTO keys_recent (k, id) VALUES (?, ?)').run(keyOf('email', b64('old')), id);
      db.prepare("UPDATE meta SET value = ? WHERE key = 'keys_upto'").run(String(id));
    });
    const after = t.open(path, { tailEntries: 100 });
    expect(after.lookupHashes('email', [b64('old')]).get(b64('old'))?.u).toBe(b64('u-old'));
    after.commitBatch(labels('c', 100).map(mapped), 2);
    expect(meta(path, 'filter_upto')).toBe('221');
    after.close();
    const rebuilt = t.open(path, { tailEntries: 100 });
    expect(rebuilt.lookupMany(wanted(['old', ...labels('b', 120), ...labels('c', 100)])).size).toBe(221);
  });
});
