import type BetterSqlite3 from 'better-sqlite3';
import { setMetaValue } from '../../src/state/meta-values.js';
import Database from '../helpers/sqlite-driver.js';
import { afterAll, describe, expect, it } from 'vitest';
import type { EntryUpdate } from '../../src/state/index.js';
import { KeyFilter, readKeyFilter, writeKeyFilter } from '../../src/state/key-filter.js';
import { arrayPairs, mergeIntoLevel } from '../../src/state/key-levels.js';
import { keyOf } from '../../src/state/lookup-key.js';
import { recordOf } from './records.js';
import { b64, levelPairsOf, tmpStates, zeroPieces } from './tmp-state.js';
import { lookupHashes, lookupMany } from './lookups.js';

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
  });

  it('is read back as written, in one piece or several, and refused when its pieces miss a block', () => {
    const path = t.file();
    t.open(path).close();
    withFile(path, (db) => {
      // 20 KB (one piece) and 3 MB (three pieces of 1 MiB)
      for (const capacity of [20_000, 3_000_000]) {
        const f = KeyFilter.forCapacity(capacity);
        for (let i = 0; i < 1_000; i++) f.add(keyOf(i % 2, b64(`in-${i}`)));
        writeKeyFilter(db, f, 7);
        const pieces = db.prepare('SELECT count(*) FROM key_filter').pluck().get();
        expect(pieces).toBe(capacity === 20_000 ? 1 : 3);
        const copy = readKeyFilter(db, 7);
        const same = copy !== null && Buffer.from(copy.words.buffer).equals(Buffer.from(f.words.buffer));
        expect([copy?.blocks, copy?.count, same]).toEqual([f.blocks, 1_000, true]);
        expect(readKeyFilter(db, 8)).toBeNull();
        setMetaValue(db, 'filter_blocks', String(f.blocks + 1));
        expect(readKeyFilter(db, 7)).toBeNull();
      }
    });
  });

  it('is written with each merge and read by the next open, which trusts it to rule keys out', () => {
    const path = t.file();
    const s = t.open(path, { tailEntries: 100 });
    s.commitBatch(labels('a', 150).map(mapped), 1);
    expect(meta(path, 'filter_upto')).toBe('150');
    s.close();
    const again = t.open(path, { tailEntries: 100 });
    expect(lookupMany(again, wanted(labels('a', 150))).size).toBe(150);
    again.close();
    // a damaged filter (its checksum fails) is not used: every key is probed, every entry found
    withFile(path, (db) => zeroPieces(db, 'key_filter', 'bits', false));
    const damaged = t.open(path, { tailEntries: 100 });
    expect(lookupMany(damaged, wanted(labels('a', 150))).size).toBe(150);
    damaged.close();
    // an emptied filter rules every key out: the open store no longer finds merged entries, so it does consult it
    withFile(path, (db) => zeroPieces(db, 'key_filter', 'bits', true));
    const emptied = t.open(path, { tailEntries: 100 });
    expect(lookupMany(emptied, wanted(labels('a', 150))).size).toBe(0);
  });

  it('is not used once a merge moved keys_upto without it, and is made again by the next merge', () => {
    const path = t.file();
    const s = t.open(path, { tailEntries: 100 });
    s.commitBatch(labels('b', 120).map(mapped), 1);
    s.close();
    // another writer appends an entry and merges it into the recent level, leaving the filter as it was
    withFile(path, (db) => {
      const id = Number(
        db
          .prepare('INSERT INTO entries (record) VALUES (?)')
          .run(recordOf({ hash: b64('old'), u: b64('u-old'), r: 100 })).lastInsertRowid,
      );
      const pair = arrayPairs(Float64Array.of(keyOf('email', b64('old'))), Float64Array.of(id));
      mergeIntoLevel(db, 'key_blocks_recent', pair);
      setMetaValue(db, 'keys_upto', String(id));
    });
    const after = t.open(path, { tailEntries: 100 });
    expect(lookupHashes(after, 'email', [b64('old')]).get(b64('old'))?.u).toBe(b64('u-old'));
    after.commitBatch(labels('c', 100).map(mapped), 2);
    expect(meta(path, 'filter_upto')).toBe('221');
    after.close();
    const rebuilt = t.open(path, { tailEntries: 100 });
    expect(lookupMany(rebuilt, wanted(['old', ...labels('b', 120), ...labels('c', 100)])).size).toBe(221);
  });

  it('covers both levels: a merge without a fold writes it whole', () => {
    const path = t.file();
    const s = t.open(path, { tailEntries: 10 });
    // the first merge folds (the main level is empty); the second adds 20 to the recent one, under a quarter of 150: no fold
    s.commitBatch(labels('m', 150).map(mapped), 1);
    s.commitBatch(labels('r', 20).map(mapped), 1);
    expect([meta(path, 'keys_main_upto'), meta(path, 'keys_upto'), meta(path, 'filter_upto')]).toEqual([
      '150',
      '170',
      '170',
    ]);
    s.close();
    const again = t.open(path, { readonly: true });
    expect(lookupMany(again, wanted([...labels('m', 150), ...labels('r', 20)])).size).toBe(170);
    again.close();
    // an emptied filter hides the entries of both levels
    withFile(path, (db) => zeroPieces(db, 'key_filter', 'bits', true));
    const emptied = t.open(path, { readonly: true });
    expect(lookupMany(emptied, wanted([...labels('m', 150), ...labels('r', 20)])).size).toBe(0);
    emptied.close();
    // a filter that does not reach keys_upto is not used: every key is probed
    withFile(path, (db) => setMetaValue(db, 'filter_upto', '160'));
    const stale = t.open(path, { readonly: true });
    expect(lookupMany(stale, wanted([...labels('m', 150), ...labels('r', 20)])).size).toBe(170);
  });

  it('merges only the tail entries another connection has not merged, each pair once in the levels', () => {
    const path = t.file();
    const a = t.open(path, { tailEntries: 100 });
    a.commitBatch(labels('a', 50).map(mapped), 1);
    // another connection reads a's 50 appended entries and merges them with its 200 (folded: the main level is empty)
    const b = t.open(path, { tailEntries: 10 });
    b.commitBatch(labels('b', 200).map(mapped), 1);
    b.close();
    expect(meta(path, 'keys_main_upto')).toBe('250');
    // a's tail holds its 50, reads b's 200 and reaches its merge with 10 more: only those 10 are new to the levels
    a.commitBatch(labels('c', 10).map(mapped), 1);
    expect([meta(path, 'keys_main_upto'), meta(path, 'keys_upto')]).toEqual(['250', '260']);
    a.close();
    const pairs = [...levelPairsOf(path, 'key_blocks'), ...levelPairsOf(path, 'key_blocks_recent')];
    expect(pairs.length).toBe(260);
    expect(new Set(pairs.map(([, id]) => id)).size).toBe(260);
  });

  it('finds entries another connection folded into the main level after this one read its filters', () => {
    const path = t.file();
    const writer = t.open(path, { tailEntries: 10 });
    writer.commitBatch(labels('m', 150).map(mapped), 1);
    writer.commitBatch(labels('r', 20).map(mapped), 1);
    const reader = t.open(path, { readonly: true });
    // the reader reads the filter of both levels
    expect(lookupMany(reader, wanted(labels('r', 20))).size).toBe(20);
    // the writer's next merge folds the recent level into the main one and rewrites the filter
    writer.commitBatch(labels('n', 60).map(mapped), 1);
    expect(meta(path, 'keys_main_upto')).toBe('230');
    // keys_upto moved: the reader reads the filter again
    expect(lookupMany(reader, wanted([...labels('m', 150), ...labels('r', 20), ...labels('n', 60)])).size).toBe(230);
  });

  it('is filled from the blocks of the levels, with every key of every block', () => {
    const path = t.file();
    const s = t.open(path, { tailEntries: 10_000 });
    // the first merge fills the filter from the levels, the second adds the tail's keys to it
    s.commitBatch(labels('p', 45_000).map(mapped), 1);
    s.commitBatch(labels('q', 10_000).map(mapped), 1);
    expect(meta(path, 'filter_upto')).toBe('55000');
    s.close();
    const again = t.open(path, { readonly: true });
    expect(lookupMany(again, wanted([...labels('p', 45_000), ...labels('q', 10_000)])).size).toBe(55_000);
  });

  it('gives a file without a filter one at the next merge, fold or not', () => {
    const path = t.file();
    const s = t.open(path, { tailEntries: 10 });
    s.commitBatch(labels('m', 150).map(mapped), 1);
    s.close();
    // every entry in the main level, and no filter at all
    withFile(path, (db) => {
      db.prepare("DELETE FROM meta WHERE key LIKE '%filter%'").run();
      db.prepare('DELETE FROM key_filter').run();
    });
    const again = t.open(path, { tailEntries: 10 });
    again.commitBatch(labels('r', 20).map(mapped), 1);
    expect([meta(path, 'keys_main_upto'), meta(path, 'filter_upto')]).toEqual(['150', '170']);
    again.close();
    const reread = t.open(path, { readonly: true });
    expect(lookupMany(reread, wanted([...labels('m', 150), ...labels('r', 20)])).size).toBe(170);
  });
});
