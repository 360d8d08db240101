// The upgrade of a schema-4 file to schema 5: the same answers as the schema-4 store gave, resumed after a kill.
// A writing open goes on to schema 6 (upgrade-v6.test.ts), so what the file holds after it is read as schema 6.
//
// The fixture (test/fixtures/state-v4) was written by the store of a version that writes schema 4, with the
// answers that store gave; test/fixtures/make-state-fixture.mjs says how. The store of this version would write
// schema 5, so the fixture is committed rather than built here.
import { afterAll, describe, expect, it } from 'vitest';
import Database from '../helpers/sqlite-driver.js';
import { SCHEMA_VERSION, type StateStore } from '../../src/state/index.js';
import { upgradeToV5Step } from '../../src/state/upgrade-v5.js';
import { count, digestsOf, everyRow, loadStateFixture, names, rawRead } from './fixture-answers.js';
import { columnRowsOf, entryRowsOf } from './records.js';
import { b64, tmpStates } from './tmp-state.js';

const t = tmpStates('uid2-upgrade-v5-');
afterAll(() => t.cleanup());

const fixture = loadStateFixture('state-v4');
const { answers, entryById } = fixture;
const fixtureCopy = (): string => fixture.copyTo(t.file());
const expectSameAnswers = (s: StateStore): void => fixture.expectSameAnswers(s, SCHEMA_VERSION);
// keys per piece in the tests that upgrade in pieces: the fixture's keys take many of them
const PIECE_KEYS = 500;

/** The tables a schema-4 file keeps its lookup keys in, and those schema 5 keeps them in. */
const V4_KEYS_TABLES = ['keys', 'keys_recent'] as const;
const V5_KEYS_TABLES = ['key_blocks', 'key_blocks_recent'] as const;
// the tables the upgrade leaves as they are: due lists, filters, saved tail keys, runs, journal (and entries,
// whose rows the upgrade to schema 6 then packs in records)
const KEPT_TABLES = ['due_lists', 'key_filter', 'key_filter_recent', 'tail_keys', 'runs', 'pending_changes'];
// schema 4's indexes on entries, which the upgrade to schema 6 drops with the old table
const ENTRIES_INDEXES = ['entries_by_bucket', 'entries_due_v2'];

/** What schema 4 held that schema 5 must keep or carry over, read from a copy of the fixture. */
const before = rawRead(fixtureCopy(), (db) => ({
  tables: names(db, 'table'),
  indexes: names(db, 'index'),
  kept: digestsOf(db, KEPT_TABLES),
  entries: count(db, 'SELECT count(*) FROM entries'),
  rows: columnRowsOf(db),
  keys: V4_KEYS_TABLES.map((table) => db.prepare(`SELECT k FROM ${table}`).pluck().all() as number[]),
}));

interface ColumnInfo {
  name: string;
  type: string;
  notnull: number;
  pk: number;
}

const metaOf = (path: string, key: string): unknown =>
  rawRead(path, (db) => db.prepare('SELECT value FROM meta WHERE key = ?').pluck().get(key));

/** Checks that the file at `path` has the key blocks the upgrade to schema 5 leaves, and the entries as they were. */
function expectSchema5(path: string): void {
  rawRead(path, (db) => {
    const keysTables = new Set<string>([...V4_KEYS_TABLES, ...V5_KEYS_TABLES]);
    // the keys tables replaced, every other table and index as it was, nothing left of the upgrade
    expect(names(db, 'table')).toEqual([...before.tables.filter((n) => !keysTables.has(n)), ...V5_KEYS_TABLES].sort());
    expect(names(db, 'index')).toEqual(before.indexes.filter((n) => !ENTRIES_INDEXES.includes(n)));
    expect(digestsOf(db, KEPT_TABLES)).toEqual(before.kept);
    expect(entryRowsOf(db)).toEqual(before.rows);
    V5_KEYS_TABLES.forEach((table, level) => {
      // first_k INTEGER PRIMARY KEY, keys BLOB NOT NULL
      const columns = db.prepare(`PRAGMA table_info(${table})`).all() as ColumnInfo[];
      expect(columns.map((c) => [c.name, c.type, c.pk])).toEqual([
        ['first_k', 'INTEGER', 1],
        ['keys', 'BLOB', 0],
      ]);
      expect(columns[1]?.notnull).toBe(1);
      // each block starts at a key of the level's old table, the first block at its least key
      const firsts = db.prepare(`SELECT first_k FROM ${table} ORDER BY first_k`).pluck().all() as number[];
      const old = new Set(before.keys[level]);
      expect(firsts.length).toBeGreaterThan(0);
      expect(firsts.filter((k) => !old.has(k))).toEqual([]);
      expect(firsts[0]).toBe(Math.min(...old));
    });
    expect(count(db, "SELECT count(*) FROM meta WHERE key LIKE 'upgrade%'")).toBe(0);
  });
}

/**
 * Runs pieces of the upgrade in a connection of its own, each in its own transaction, and closes it as a killed
 * run's would be. The piece that would finish is rolled back: the last one is left to the next writing open,
 * which also records the new version. Returns the pieces done, and whether the next one is the last.
 */
function upgradePieces(path: string, most: number): { pieces: number; lastLeft: boolean } {
  const db = new Database(path);
  let pieces = 0;
  try {
    while (pieces < most) {
      const done = db.transaction(() => {
        const finished = upgradeToV5Step(db, PIECE_KEYS);
        if (finished) throw new LastPiece();
        return finished;
      });
      try {
        expect(done.immediate()).toBe(false);
      } catch (err) {
        if (err instanceof LastPiece) return { pieces, lastLeft: true };
        throw err;
      }
      pieces++;
    }
    return { pieces, lastLeft: false };
  } finally {
    db.close();
  }
}

class LastPiece extends Error {}

/** While the upgrade is under way: still schema 4, and a read-only open waits for a writing run to finish it. */
function expectUnderWay(path: string): void {
  expect(() => t.open(path, { readonly: true })).toThrow(`has schema 4 and needs an upgrade to ${SCHEMA_VERSION}`);
  expect(metaOf(path, 'schema_version')).toBe('4');
}

describe('the schema-4 fixture', () => {
  it('holds what the upgrade must carry: both keys tables, a saved tail, checks, journal, odd values', () => {
    rawRead(fixtureCopy(), (db) => {
      expect(db.prepare("SELECT value FROM meta WHERE key = 'schema_version'").pluck().get()).toBe('4');
      // entries in keys (several folds' worth), in keys_recent, and after both (the tail, its keys saved)
      const upto = (key: string) => Number(db.prepare('SELECT value FROM meta WHERE key = ?').pluck().get(key));
      expect(count(db, 'SELECT count(*) FROM keys')).toBe(upto('keys_main_upto'));
      expect(count(db, 'SELECT count(*) FROM keys')).toBeGreaterThanOrEqual(4_000);
      expect(count(db, 'SELECT count(*) FROM keys_recent')).toBe(upto('keys_upto') - upto('keys_main_upto'));
      expect(count(db, 'SELECT count(*) FROM keys_recent')).toBeGreaterThan(0);
      expect(count(db, 'SELECT count(*) FROM tail_keys')).toBeGreaterThan(0);
      expect(count(db, 'SELECT count(*) FROM entries')).toBeGreaterThan(upto('keys_upto'));
      expect(count(db, 'SELECT count(*) FROM key_filter_recent')).toBeGreaterThan(0);
      expect(count(db, 'SELECT count(*) FROM entries WHERE last_optout_check IS NOT NULL')).toBeGreaterThan(0);
      expect(count(db, 'SELECT count(*) FROM entries WHERE due = 1')).toBeGreaterThan(0);
      expect(count(db, 'SELECT count(*) FROM entries WHERE p IS NOT NULL')).toBeGreaterThan(0);
      expect(count(db, 'SELECT count(*) FROM pending_changes')).toBeGreaterThan(0);
      // hashes and raw UIDs that are not canonical base64 are kept as text
      expect(count(db, "SELECT count(*) FROM entries WHERE typeof(hash) = 'text'")).toBeGreaterThan(0);
      expect(count(db, "SELECT count(*) FROM entries WHERE typeof(u) = 'text'")).toBeGreaterThan(0);
    });
    expect(answers.tailEntries).toBeGreaterThan(0);
    expect(answers.entries.length).toBe(before.entries);
  });
});

describe('upgrade of a schema-4 file to schema 5', () => {
  it('gives every answer the schema-4 store gave, and keeps every meta mark', () => {
    fixture.expectUpgradeKeeps(fixtureCopy(), (path) => t.open(path), SCHEMA_VERSION);
  });

  it('leaves key_blocks and key_blocks_recent for keys and keys_recent, the rest as it was', () => {
    const path = fixtureCopy();
    t.open(path).close();
    expectSchema5(path);
  });

  it('goes on working: new entries merged into the blocks, with and without a fold', () => {
    const path = fixtureCopy();
    const ADDED = 400;
    const added = (i: number) => ({ type: 'email' as const, hash: b64(`added ${i}`) });
    const now = answers.now;
    // the first commit makes the fixture's tail long enough to be merged (and keys_recent's level folded into the
    // main one), the second is a merge of its own, too short for a fold
    let s = t.open(path, { tailEntries: 300 });
    expect(answers.tailEntries + 100).toBeGreaterThanOrEqual(300);
    for (const [from, to] of [
      [0, 100],
      [100, ADDED],
    ]) {
      const batch = Array.from({ length: to - from }, (_, j) => ({
        ...added(from + j),
        outcome: { kind: 'mapped' as const, u: b64(`added u ${from + j}`), p: null, r: now + j },
      }));
      s.commitBatch(batch, now);
      expect(s.info().tailEntries).toBe(0);
    }
    s.close();
    // every entry merged, the first merge folded into the main level
    const first = answers.entries.length + 1;
    expect(metaOf(path, 'keys_upto')).toBe(String(first - 1 + ADDED));
    expect(metaOf(path, 'keys_main_upto')).toBe(String(first + 99));
    s = t.open(path);
    const keys = [
      ...answers.keys.map(([type, hash]) => ({ type, hash })),
      ...Array.from({ length: ADDED }, (_, i) => added(i)),
    ];
    const found = s.lookupMany(keys);
    const ids = keys.map((k) => found.get(`${k.type}:${k.hash}`)?.id ?? null);
    expect(ids).toEqual([...answers.lookups, ...Array.from({ length: ADDED }, (_, i) => first + i)]);
    expect(found.get(`${added(7).type}:${added(7).hash}`)).toMatchObject({ u: b64('added u 7'), r: now + 7 });
    const one = entryById.get(answers.lookups.find((id) => id !== null) ?? -1);
    expect(one).toBeDefined();
    expect(found.get(`${one?.type}:${one?.hash}`)).toEqual(one);
    expect(s.integrityCheck()).toBe('ok');
  });

  it('resumes after a kill in the middle, a piece rolled back whole', () => {
    const path = fixtureCopy();
    expect(upgradePieces(path, 3).pieces).toBe(3);
    // a piece whose transaction fails leaves nothing of itself
    const was = rawRead(path, everyRow);
    const db = new Database(path);
    try {
      const failing = db.transaction(() => {
        upgradeToV5Step(db, PIECE_KEYS);
        throw new Error('killed');
      });
      expect(() => failing.immediate()).toThrow('killed');
    } finally {
      db.close();
    }
    expect(rawRead(path, everyRow)).toEqual(was);
    expectUnderWay(path);
    const s = t.open(path);
    expectSameAnswers(s);
    expect(s.integrityCheck()).toBe('ok');
    s.close();
    expectSchema5(path);
  });

  it('resumes after a kill between any two pieces', () => {
    const path = fixtureCopy();
    let pieces = 0;
    for (;;) {
      const step = upgradePieces(path, 1);
      pieces += step.pieces;
      if (step.lastLeft) break;
      expectUnderWay(path);
      // a bound, should a step never finish
      expect(pieces).toBeLessThan(1_000);
    }
    // no piece copies more keys than it is given
    const keys = before.keys[0].length + before.keys[1].length;
    expect(pieces + 1).toBeGreaterThanOrEqual(Math.ceil(keys / PIECE_KEYS));
    // the file says schema 5 now: its blocks are of format 1, which a version that writes schema 5 reads
    const raw = new Database(path, { readonly: true });
    try {
      const formats = raw
        .prepare(
          'SELECT DISTINCT unicode(CAST(substr(keys, 1, 1) AS TEXT)) FROM (SELECT keys FROM key_blocks UNION ALL SELECT keys FROM key_blocks_recent)',
        )
        .pluck()
        .all() as number[];
      expect(formats.length).toBeGreaterThan(0);
      for (const byte0 of formats) expect(byte0 >= 1 && byte0 <= 6).toBe(true);
    } finally {
      raw.close();
    }
    const s = t.open(path);
    expectSameAnswers(s);
    expect(s.integrityCheck()).toBe('ok');
    s.close();
    expectSchema5(path);
  });
});
