// The upgrade of a schema-3 file to schema 4: the same answers as the schema-3 store gave, resumed after a kill.
//
// The fixture (test/fixtures/state-v3) was written by the store of the last version that writes schema 3, with
// the answers that store gave; test/fixtures/make-state-fixture.mjs says how. The store of this version would
// write schema 4, so the fixture is committed rather than built here.
import { afterAll, describe, expect, it } from 'vitest';
import Database from '../helpers/sqlite-driver.js';
import { SCHEMA_VERSION, type StateStore } from '../../src/state/index.js';
import { decodeIds } from '../../src/state/id-lists.js';
import { storedOf } from '../../src/state/stored-bytes.js';
import { upgradeToV4Step } from '../../src/state/upgrade-v4.js';
import { loadStateFixture, rawRead } from './fixture-answers.js';
import { entryRowsOf } from './records.js';
import { tmpStates } from './tmp-state.js';

const t = tmpStates('uid2-upgrade-v4-');
afterAll(() => t.cleanup());

const fixture = loadStateFixture('state-v3');
const { answers } = fixture;
const fixtureCopy = (): string => fixture.copyTo(t.file());
const expectSameAnswers = (s: StateStore): void => fixture.expectSameAnswers(s, SCHEMA_VERSION);

describe('the schema-3 fixture', () => {
  it('holds what the upgrade must carry: both keys tables, a saved tail, checks, journal, odd values', () => {
    const path = fixtureCopy();
    rawRead(path, (db) => {
      const count = (sql: string) => db.prepare(sql).pluck().get() as number;
      expect(count("SELECT value FROM meta WHERE key = 'schema_version'")).toBe('3');
      expect(count('SELECT count(*) FROM keys')).toBeGreaterThan(0);
      expect(count('SELECT count(*) FROM keys_recent')).toBeGreaterThan(0);
      expect(count('SELECT count(*) FROM tail_keys')).toBeGreaterThan(0);
      expect(count('SELECT count(*) FROM entries WHERE last_optout_check IS NOT NULL')).toBeGreaterThan(0);
      expect(count('SELECT count(*) FROM entries WHERE due = 1')).toBeGreaterThan(0);
      expect(count('SELECT count(*) FROM entries WHERE p IS NOT NULL')).toBeGreaterThan(0);
      expect(count('SELECT count(*) FROM pending_changes')).toBeGreaterThan(0);
    });
    expect(answers.tailEntries).toBeGreaterThan(0);
    // hashes and raw UIDs that stay text after the upgrade
    expect(answers.entries.filter((e) => typeof storedOf(e[2] as string) === 'string').length).toBeGreaterThan(0);
    expect(answers.entries.filter((e) => e[4] !== null && typeof storedOf(e[4] as string) === 'string').length).toBe(
      answers.entries.filter((e) => typeof e[4] === 'string' && e[4].startsWith('odd')).length,
    );
  });
});

describe('upgrade of a schema-3 file to schema 4', () => {
  it('gives every answer the schema-3 store gave, and keeps every meta mark', () => {
    fixture.expectUpgradeKeeps(fixtureCopy(), (path) => t.open(path), SCHEMA_VERSION);
  });

  it('leaves stored bytes, no first_mapped, due lists, no table or mark of the upgrade', () => {
    const path = fixtureCopy();
    t.open(path).close();
    rawRead(path, (db) => {
      // the file goes on to schema 6: each entry's values in its record
      const rows = entryRowsOf(db).map((e) => [e.id, e.hash, e.u, e.p]);
      const stored = (text: unknown) => (text === null ? null : storedOf(text as string));
      expect(rows).toEqual(answers.entries.map((e) => [e[0], stored(e[2]), stored(e[4]), stored(e[5])]));
      const columns = (db.prepare('PRAGMA table_info(entries)').all() as { name: string }[]).map((c) => c.name);
      expect(columns).toEqual(['id', 'record']);
      const indexes = db
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'entries' ORDER BY name")
        .pluck()
        .all();
      expect(indexes).toEqual([]);
      // every entry with an r is on the list of its r's UTC day
      const listed = new Map<number, number>();
      for (const [day, ids] of db.prepare('SELECT day, ids FROM due_lists').raw().all() as [number, Buffer][])
        decodeIds(ids, (id) => listed.set(id, day));
      const withR = answers.entries.filter((e) => e[6] !== null);
      expect(listed.size).toBe(withR.length);
      for (const e of withR) expect(listed.get(e[0] as number)).toBe(Math.floor((e[6] as number) / 86_400));
      expect(db.prepare("SELECT count(*) FROM sqlite_schema WHERE name LIKE 'entries_v_'").pluck().get()).toBe(0);
      expect(db.prepare("SELECT count(*) FROM meta WHERE key = 'upgrade_copied'").pluck().get()).toBe(0);
    });
  });

  it('goes on working: updates of upgraded entries, new entries, a tombstone by raw UID', () => {
    const path = fixtureCopy();
    fixture.expectWritesAfterUpgrade(t.open(path));
  });

  it('resumes after a kill between any two pieces; readers see the old table meanwhile', () => {
    const path = fixtureCopy();
    const lastId = answers.entries.length;
    let pieces = 0;
    // each piece in a connection of its own, closed after it as a killed run's would be; the swap is left to the
    // next writing open, which also records the new version
    for (;;) {
      const db = new Database(path);
      try {
        const copied = db.prepare("SELECT value FROM meta WHERE key = 'upgrade_copied'").pluck().get();
        if (copied === String(lastId)) break;
        expect(db.transaction(() => upgradeToV4Step(db, 700)).immediate()).toBe(false);
        pieces++;
      } finally {
        db.close();
      }
      // a read-only open waits for a writing run; a plain reader still reads text from the old table
      expect(() => t.open(path, { readonly: true })).toThrow(`has schema 3 and needs an upgrade to ${SCHEMA_VERSION}`);
      rawRead(path, (db) => {
        expect(db.prepare("SELECT value FROM meta WHERE key = 'schema_version'").pluck().get()).toBe('3');
        expect(db.prepare("SELECT count(*) FROM entries WHERE typeof(hash) = 'text'").pluck().get()).toBe(lastId);
      });
    }
    expect(pieces).toBe(1 + Math.ceil(lastId / 700));
    const s = t.open(path);
    expectSameAnswers(s);
    expect(s.integrityCheck()).toBe('ok');
  });

  it('rolls a piece back whole when its transaction fails', () => {
    const path = fixtureCopy();
    const db = new Database(path);
    try {
      expect(db.transaction(() => upgradeToV4Step(db, 700)).immediate()).toBe(false);
      expect(db.transaction(() => upgradeToV4Step(db, 700)).immediate()).toBe(false);
      const failing = db.transaction(() => {
        upgradeToV4Step(db, 700);
        throw new Error('killed');
      });
      expect(() => failing.immediate()).toThrow('killed');
      expect(db.prepare("SELECT value FROM meta WHERE key = 'upgrade_copied'").pluck().get()).toBe('700');
      expect(db.prepare('SELECT count(*) FROM entries_v4').pluck().get()).toBe(700);
    } finally {
      db.close();
    }
    const s = t.open(path);
    expectSameAnswers(s);
  });
});
