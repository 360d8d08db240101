// The `state` commands' reader of any state file: a schema-5 file read by its columns, a schema-6 one by its records.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type EntryTally, openStateForReading, type StateFileReader } from '../../src/cli/state/state-file.js';
import type { StateEntry } from '../../src/state/index.js';
import { upgradeToV6Step } from '../../src/state/upgrade-v6.js';
import Database from '../helpers/sqlite-driver.js';
import { loadStateFixture, rawRead } from '../state/fixture-answers.js';

const dir = mkdtempSync(join(tmpdir(), 'uid2-state-file-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const fixture = loadStateFixture('state-v5');
const { answers, entryById } = fixture;
const entries = [...entryById.values()];
const DAY = 86_400;
let n = 0;

/** The schema-5 fixture as it is. */
const v5File = (): string => fixture.copyTo(join(dir, `v5-${++n}.db`));

/**
 * The fixture with its entries table turned into records by the upgrade's pieces alone: meta still says schema 5,
 * so the reader must go by the table.
 */
function v6File(): string {
  const path = v5File();
  const db = new Database(path);
  try {
    while (!db.transaction(() => upgradeToV6Step(db, 2_000)).immediate());
  } finally {
    db.close();
  }
  return path;
}

function readWith<T>(path: string, read: (file: StateFileReader) => T, recordsPage?: number): T {
  const file = openStateForReading(path, recordsPage);
  try {
    return read(file);
  } finally {
    file.close();
  }
}

/** What the reader should say of the fixture, from the entries its store gave. */
const expected = {
  entries: entries.map((e: StateEntry) => ({ type: e.type, hash: e.hash, status: e.status, u: e.u, p: e.p, r: e.r })),
  byStatus: {
    mapped: entries.filter((e) => e.status === 'mapped').length,
    optout: entries.filter((e) => e.status === 'optout').length,
    invalid: entries.filter((e) => e.status === 'invalid').length,
  },
  dueNow: entries.filter((e) => e.r !== null && e.r <= answers.now).length,
  dueSoon: entries.filter((e) => e.r !== null && e.r > answers.now && e.r <= answers.now + 2 * DAY).length,
  withoutR: entries.filter((e) => e.r === null).length,
};

/** The fixture's figures from one tally: r at most now, and in (now, now + 2 days]. */
function tallied({ byStatus, withoutR, atMost: [now, soon] }: EntryTally) {
  return { byStatus, dueNow: now, dueSoon: soon - now, withoutR };
}

function answersOf(path: string, recordsPage?: number) {
  return readWith(
    path,
    (file) => ({
      entries: [...file.entries()],
      ...tallied(file.tally([answers.now, answers.now + 2 * DAY])),
    }),
    recordsPage,
  );
}

describe('openStateForReading', () => {
  it('reads a schema-5 file by its columns', () => {
    expect(answersOf(v5File())).toEqual(expected);
  });

  it('reads a file whose entries are records (schema 6) by decoding them, paged in id order', () => {
    const path = v6File();
    rawRead(path, (db) => {
      expect(db.prepare("SELECT value FROM meta WHERE key = 'schema_version'").pluck().get()).toBe('5');
    });
    const got = answersOf(path);
    expect(got).toEqual(expected);
    // the fixture has entries of every kind to count
    for (const c of [expected.dueNow, expected.dueSoon, expected.withoutR, ...Object.values(expected.byStatus)])
      expect(c).toBeGreaterThan(0);
    // pages that end inside the table and one that ends at its end: the same answers
    for (const page of [1, 999, expected.entries.length]) {
      expect(answersOf(path, page)).toEqual(expected);
    }
  });

  it('a walk of records lets the caller query between two entries', () => {
    readWith(
      v6File(),
      (file) => {
        let seen = 0;
        for (const _ of file.entries()) {
          if (seen++ % 250 === 0) expect(file.meta('api')).toBe(answers.meta.api);
        }
        expect(seen).toBe(expected.entries.length);
      },
      100,
    );
  });
});
