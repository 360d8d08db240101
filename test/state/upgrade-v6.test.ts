// The upgrade of a schema-5 file to schema 6: every row packed in a record, the same answers, resumed after a kill.
//
// The fixture (test/fixtures/state-v5) was written by the store of the last version that writes schema 5, with
// the answers that store gave; test/fixtures/make-state-fixture.mjs says how. The store of this version would
// write schema 6, so the fixture is committed rather than built here. The upgrade's pieces are also run on their
// own (upgradeToV6Step in a connection of the test's), and what they leave read with SQL and the record codec.
import { afterAll, describe, expect, it } from 'vitest';
import Database from '../helpers/sqlite-driver.js';
import { SCHEMA_VERSION, StateFormatError, type StateStore } from '../../src/state/index.js';
import { upgradeToV6Step } from '../../src/state/upgrade-v6.js';
import { count, digestsOf, everyRow, loadStateFixture, metaRows, names, rawRead } from './fixture-answers.js';
import { columnRowsOf, type EntryRow, entryRowsAt, entryRowsOf } from './records.js';
import { tmpStates } from './tmp-state.js';

type Connection = InstanceType<typeof Database>;

const t = tmpStates('uid2-upgrade-v6-');
afterAll(() => t.cleanup());

const fixture = loadStateFixture('state-v5');
const { answers } = fixture;
const fixtureCopy = (): string => fixture.copyTo(t.file());
const expectSameAnswers = (s: StateStore): void => fixture.expectSameAnswers(s, SCHEMA_VERSION);
// entries per piece in the tests that upgrade in pieces: the fixture's entries take many of them
const PIECE_ROWS = 500;

// the tables the upgrade leaves as they are: key blocks, filters, due lists, saved tail keys, runs, journal
const KEPT_TABLES = [
  'key_blocks',
  'key_blocks_recent',
  'key_filter',
  'key_filter_recent',
  'due_lists',
  'tail_keys',
  'runs',
  'pending_changes',
];
// schema 5's indexes on entries, dropped with the old table
const OLD_INDEXES = ['entries_by_bucket', 'entries_due_v2'];

/** What schema 5 held that schema 6 must keep or carry over, read from a copy of the fixture. */
const before = rawRead(fixtureCopy(), (db) => ({
  tables: names(db, 'table'),
  indexes: names(db, 'index'),
  kept: digestsOf(db, KEPT_TABLES),
  rows: columnRowsOf(db),
}));

interface ColumnInfo {
  name: string;
  type: string;
  notnull: number;
  pk: number;
}

/** One piece in a transaction of its own: what the piece gave. */
const pieceOf = (db: Connection, rows = PIECE_ROWS): boolean =>
  db.transaction(() => upgradeToV6Step(db, rows)).immediate();

/** Runs the pieces left of the upgrade on their own (as migrate would, without recording the version). */
function finishPieces(path: string, rows = PIECE_ROWS): number {
  const db = new Database(path);
  try {
    let pieces = 0;
    while (!pieceOf(db, rows)) {
      pieces++;
      // a bound, should a step never finish
      expect(pieces).toBeLessThan(1_000);
    }
    return pieces + 1;
  } finally {
    db.close();
  }
}

/**
 * Checks that the file at `path` has schema 6's entries table as the upgrade leaves it, holding `rows` (the old
 * rows by default), every other table as it was, and meta as it was but for schema_version (`version`).
 */
function expectSchema6(path: string, version: string, rows: EntryRow[] = before.rows): void {
  rawRead(path, (db) => {
    expect(names(db, 'table')).toEqual(before.tables);
    expect(names(db, 'index')).toEqual(before.indexes.filter((n) => !OLD_INDEXES.includes(n)));
    const columns = db.prepare('PRAGMA table_info(entries)').all() as ColumnInfo[];
    expect(columns.map((c) => [c.name, c.type, c.pk, c.notnull])).toEqual([
      ['id', 'INTEGER', 1, 0],
      ['record', 'BLOB', 0, 1],
    ]);
    expect(digestsOf(db, KEPT_TABLES)).toEqual(before.kept);
    expect(entryRowsOf(db)).toEqual(rows);
    expect(count(db, "SELECT count(*) FROM meta WHERE key LIKE 'upgrade%'")).toBe(0);
    expect(count(db, "SELECT count(*) FROM sqlite_schema WHERE type = 'trigger'")).toBe(0);
  });
  expect(metaRows(path)).toEqual(fixtureMeta.map(([k, v]) => [k, k === 'schema_version' ? version : v]));
}
const fixtureMeta = metaRows(fixtureCopy());

/** While the upgrade is under way: still schema 5, the old table whole, and a read-only open waits. */
function expectUnderWay(path: string): void {
  expect(() => t.open(path, { readonly: true })).toThrow(/has schema 5 and needs an upgrade to 6/);
  rawRead(path, (db) => {
    expect(db.prepare("SELECT value FROM meta WHERE key = 'schema_version'").pluck().get()).toBe('5');
    expect(columnRowsOf(db)).toEqual(before.rows);
  });
}

/** A copy of the fixture with `sql` run on it (values schema 5 never writes). */
function alteredCopy(...sql: string[]): string {
  const path = fixtureCopy();
  const db = new Database(path);
  try {
    for (const s of sql) db.exec(s);
  } finally {
    db.close();
  }
  return path;
}

// ids of fixture entries of a kind, to alter in the tests of odd values
const idOf = (which: (e: EntryRow) => boolean): number => {
  const e = before.rows.find(which);
  if (e === undefined) throw new Error('the fixture has no such entry');
  return e.id;
};
const mappedId = idOf((e) => e.status === 1 && e.r !== null && e.lastOptoutCheckS !== null);
const optoutId = idOf((e) => e.status === 2 && e.optedOutSinceMs !== null);
const v2Id = idOf((e) => e.bucketId !== null);

describe('the schema-5 fixture', () => {
  it('holds what the upgrade must carry: both key levels, a saved tail, checks, journal, odd values', () => {
    rawRead(fixtureCopy(), (db) => {
      expect(db.prepare("SELECT value FROM meta WHERE key = 'schema_version'").pluck().get()).toBe('5');
      expect(count(db, 'SELECT count(*) FROM key_blocks')).toBeGreaterThan(0);
      expect(count(db, 'SELECT count(*) FROM key_blocks_recent')).toBeGreaterThan(0);
      expect(count(db, 'SELECT count(*) FROM tail_keys')).toBeGreaterThan(0);
      expect(count(db, 'SELECT count(*) FROM due_lists')).toBeGreaterThan(0);
      expect(count(db, 'SELECT count(*) FROM key_filter_recent')).toBeGreaterThan(0);
      expect(count(db, 'SELECT count(*) FROM pending_changes')).toBeGreaterThan(0);
      expect(OLD_INDEXES.every((n) => names(db, 'index').includes(n))).toBe(true);
    });
    const some = (which: (e: EntryRow) => boolean): number => before.rows.filter(which).length;
    expect(some((e) => e.lastOptoutCheckS !== null)).toBeGreaterThan(0);
    expect(some((e) => e.due)).toBeGreaterThan(0);
    expect(some((e) => e.p !== null)).toBeGreaterThan(0);
    expect(some((e) => e.bucketId !== null)).toBeGreaterThan(0);
    expect(some((e) => e.status === 3)).toBeGreaterThan(0);
    // hashes and raw UIDs that are not canonical base64 are kept as text
    expect(some((e) => typeof e.hash === 'string')).toBeGreaterThan(0);
    expect(some((e) => typeof e.u === 'string')).toBeGreaterThan(0);
    expect(answers.tailEntries).toBeGreaterThan(0);
    expect(answers.entries.length).toBe(before.rows.length);
  });
});

describe('the pieces of the upgrade to schema 6, run on their own', () => {
  it('leave entries (id, record), each record the old row value for value, every other table as it was', () => {
    const path = fixtureCopy();
    // one piece makes the table, one copies every entry, the last swaps the tables
    expect(finishPieces(path, 100_000)).toBe(3);
    expectSchema6(path, '5');
  });

  it('keep values schema 5 never writes as a record can hold them: REAL, negative and wide times, status 0', () => {
    const path = alteredCopy(
      `UPDATE entries SET r = r + 0.5, last_optout_check = 5000000000 WHERE id = ${mappedId}`,
      `UPDATE entries SET opted_out_since = 1.25, last_mapped = -7, status = 0 WHERE id = ${optoutId}`,
      `UPDATE entries SET bucket_id = '' WHERE id = ${v2Id}`,
    );
    const rows = rawRead(path, columnRowsOf);
    const at = (id: number) => rows.find((e) => e.id === id);
    expect(at(mappedId)?.r).not.toBe(Math.floor(at(mappedId)?.r ?? 0));
    expect(at(optoutId)).toMatchObject({ status: 0, lastMappedS: -7, optedOutSinceMs: 1.25 });
    finishPieces(path);
    expectSchema6(path, '5', rows);
  });

  it('refuse a value no record can hold, naming the entry, and leave the file as it was', () => {
    const cases: [string, RegExp][] = [
      [`UPDATE entries SET type = 2 WHERE id = ${mappedId}`, /number 2 in column type/],
      [`UPDATE entries SET status = 4 WHERE id = ${mappedId}`, /number 4 in column status/],
      [`UPDATE entries SET due = 2 WHERE id = ${mappedId}`, /number 2 in column due/],
      [`UPDATE entries SET hash = 12345 WHERE id = ${mappedId}`, /number 12345 in column hash/],
      [`UPDATE entries SET r = 'soon' WHERE id = ${mappedId}`, /a text in column r/],
      [`UPDATE entries SET opted_out_since = 9007199254740993 WHERE id = ${optoutId}`, /column opted_out_since/],
      [`UPDATE entries SET bucket_id = X'00' WHERE id = ${v2Id}`, /a blob in column bucket_id/],
    ];
    for (const [sql, message] of cases) {
      const id = Number(/id = (\d+)/.exec(sql)?.[1]);
      const path = alteredCopy(sql);
      const db = new Database(path);
      try {
        // the table made, then one piece of every entry, which refuses
        expect(pieceOf(db, 100_000)).toBe(false);
        const was = everyRow(db);
        let refused: unknown;
        try {
          pieceOf(db, 100_000);
        } catch (err) {
          refused = err;
        }
        expect(refused, sql).toBeInstanceOf(StateFormatError);
        expect((refused as Error).message).toMatch(message);
        expect((refused as Error).message).toContain(`entry ${id} `);
        expect((refused as Error).message).toContain('stays at schema 5');
        // the failed piece rolled back, the earlier ones kept
        expect(everyRow(db)).toEqual(was);
      } finally {
        db.close();
      }
    }
  });

  it('resume after a kill between any two pieces; readers see the old table meanwhile', () => {
    const path = fixtureCopy();
    let pieces = 0;
    // each piece in a connection of its own, closed after it as a killed run's would be
    for (;;) {
      const db = new Database(path);
      try {
        const copied = db.prepare("SELECT value FROM meta WHERE key = 'upgrade_copied'").pluck().get();
        if (copied === String(before.rows[before.rows.length - 1].id)) break;
        expect(pieceOf(db)).toBe(false);
        pieces++;
        // no piece copies more entries than it is given
        expect(count(db, 'SELECT count(*) FROM entries_v6')).toBe(
          Math.min((pieces - 1) * PIECE_ROWS, before.rows.length),
        );
      } finally {
        db.close();
      }
      expectUnderWay(path);
    }
    expect(pieces).toBe(1 + Math.ceil(before.rows.length / PIECE_ROWS));
    expect(finishPieces(path)).toBe(1);
    expectSchema6(path, '5');
  });

  it('copy again the entries a schema-5 version changed after they were copied', () => {
    const path = fixtureCopy();
    const db = new Database(path);
    const copied = (): unknown => db.prepare("SELECT value FROM meta WHERE key = 'upgrade_copied'").pluck().get();
    try {
      // the table made, three pieces copied
      for (let i = 0; i < 4; i++) expect(pieceOf(db)).toBe(false);
      expect(copied()).toBe(String(before.rows[3 * PIECE_ROWS - 1].id));
      // what a version that writes schema 5 may do meanwhile: delete, update and append entries
      const [a, b, c] = [before.rows[99].id, before.rows[199].id, before.rows[1_399].id];
      db.prepare('DELETE FROM entries WHERE id = ?').run(b);
      expect(copied()).toBe(String(b - 1));
      db.prepare('UPDATE entries SET status = 2, u = NULL, p = NULL, r = NULL, opted_out_since = 42 WHERE id = ?').run(
        a,
      );
      expect(copied()).toBe(String(a - 1));
      expect(count(db, `SELECT count(*) FROM entries_v6 WHERE id >= ${a}`)).toBe(0);
      // an entry not copied yet changes nothing of the copy
      db.prepare('UPDATE entries SET last_optout_check = 7 WHERE id = ?').run(c);
      db.prepare("INSERT INTO entries (type, hash, status, due) VALUES (1, X'0102', 3, 0)").run();
      expect(copied()).toBe(String(a - 1));
    } finally {
      db.close();
    }
    const changed = rawRead(path, columnRowsOf);
    expect(changed).not.toEqual(before.rows);
    finishPieces(path);
    expectSchema6(path, '5', changed);
  });

  it('roll a piece back whole when its transaction fails', () => {
    const path = fixtureCopy();
    const db = new Database(path);
    try {
      expect(pieceOf(db)).toBe(false);
      expect(pieceOf(db)).toBe(false);
      const was = everyRow(db);
      const failing = db.transaction(() => {
        upgradeToV6Step(db, PIECE_ROWS);
        throw new Error('killed');
      });
      expect(() => failing.immediate()).toThrow('killed');
      expect(everyRow(db)).toEqual(was);
      expect(db.prepare("SELECT value FROM meta WHERE key = 'upgrade_copied'").pluck().get()).toBe(
        String(before.rows[PIECE_ROWS - 1].id),
      );
    } finally {
      db.close();
    }
    expectUnderWay(path);
    finishPieces(path);
    expectSchema6(path, '5');
  });
});

// These go through openState and the store, which read schema 6's records.
describe('upgrade of a schema-5 file to schema 6 by a writing open', () => {
  it('gives every answer the schema-5 store gave, and keeps every meta mark', () => {
    fixture.expectUpgradeKeeps(fixtureCopy(), (path) => t.open(path), SCHEMA_VERSION);
  });

  it('leaves schema 6: entries (id, record) holding the old rows, the rest as it was', () => {
    const path = fixtureCopy();
    t.open(path).close();
    expectSchema6(path, '6');
  });

  it('finishes an upgrade a killed run left half done, with the same answers', () => {
    const path = fixtureCopy();
    const db = new Database(path);
    try {
      for (let i = 0; i < 4; i++) expect(pieceOf(db)).toBe(false);
    } finally {
      db.close();
    }
    expectUnderWay(path);
    const s = t.open(path);
    expectSameAnswers(s);
    expect(s.integrityCheck()).toBe('ok');
    s.close();
    expectSchema6(path, '6');
  });

  it('goes on working: updates of upgraded entries, new entries, a tombstone by raw UID', () => {
    const path = fixtureCopy();
    const s = t.open(path);
    const other = fixture.expectWritesAfterUpgrade(s);
    s.close();
    // the writes are records too: the new entry and the tombstone read back from the file
    const rows = entryRowsAt(path);
    expect(rows).toHaveLength(answers.entries.length + 1);
    expect(rows.find((e) => e.id === other)).toMatchObject({ status: 2, u: null, optedOutSinceMs: 42 });
  });
});
