// The upgrade of a schema-3 file to schema 4: the same answers as the schema-3 store gave, resumed after a kill.
//
// The fixture (test/fixtures/state-v3) was written by the store of the last version that writes schema 3, with
// the answers that store gave; make-fixture.mjs beside it says how. The store of this version would write schema
// 4, so the fixture is committed rather than built here.
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import Database from '../helpers/sqlite-driver.js';
import type {
  DueDay,
  DueEntry,
  OptoutCandidate,
  PendingChange,
  RunRecord,
  StateCounts,
  StateEntry,
  StateMeta,
  StateStore,
} from '../../src/state/index.js';
import { decodeIds } from '../../src/state/id-lists.js';
import { storedOf } from '../../src/state/stored-bytes.js';
import { upgradeToV4Step } from '../../src/state/upgrade-v4.js';
import { b64, tmpStates } from './tmp-state.js';

const t = tmpStates('uid2-upgrade-v4-');
afterAll(() => t.cleanup());

const FIXTURE = resolve(dirname(fileURLToPath(import.meta.url)), '../fixtures/state-v3');
// the order of an entry's fields in the answers' `entries`
const ENTRY_FIELDS = [
  'id',
  'type',
  'hash',
  'status',
  'u',
  'p',
  'r',
  'bucketId',
  'lastMappedS',
  'lastOptoutCheckS',
  'optedOutSinceMs',
  'due',
] as const;
const DUE_FIELDS = ['id', 'type', 'hash', 'u', 'p', 'r', 'bucketId'] as const;
const SWEEP_FIELDS = ['id', 'type', 'hash', 'u', 'p', 'lastOptoutCheckS'] as const;
const EXPORT_FIELDS = ['id', 'type', 'hash', 'status', 'u', 'p', 'r'] as const;

/** What the schema-3 store answered (make-fixture.mjs): entries whole, other lists as ids. */
interface Answers {
  now: number;
  keys: ['email' | 'phone', string][];
  lookups: (number | null)[];
  entries: unknown[][];
  stored: Record<'email' | 'phone', number[]>;
  due: number[];
  countDue: number;
  dueByDay: DueDay[];
  dueDays: DueDay[];
  dueV2: number[];
  countDueV2: number;
  bucketEntries: { count: number; oldestMappedS: number | null };
  sweep: number[];
  countWithRawUid: number;
  counts: StateCounts;
  export: number[];
  remap: PendingChange[];
  optout: PendingChange[];
  runs: RunRecord[];
  meta: StateMeta;
  tailEntries: number;
}

const answers = JSON.parse(gunzipSync(readFileSync(join(FIXTURE, 'answers.json.gz'))).toString('utf8')) as Answers;
const entryById = new Map<number, StateEntry>(
  answers.entries.map((values) => {
    const e = Object.fromEntries(ENTRY_FIELDS.map((f, i) => [f, values[i]])) as unknown as StateEntry;
    return [e.id, e];
  }),
);

function fixtureCopy(): string {
  const path = t.file();
  writeFileSync(path, gunzipSync(readFileSync(join(FIXTURE, 'state-v3.db.gz'))), { mode: 0o600 });
  return path;
}

function pick<K extends string>(value: object, fields: readonly K[]): Record<K, unknown> {
  const v = value as Record<string, unknown>;
  return Object.fromEntries(fields.map((f) => [f, v[f]])) as Record<K, unknown>;
}

/** The fixture's entries of these ids, with the fields an answer has. */
function expectedOf<K extends string>(ids: readonly number[], fields: readonly K[]): Record<K, unknown>[] {
  return ids.map((id) => pick(entryById.get(id) ?? { id }, fields));
}

function walk<T>(page: (after: T | null) => T[]): T[] {
  const out: T[] = [];
  for (let after: T | null = null; ; ) {
    const p = page(after);
    if (p.length === 0) return out;
    out.push(...p);
    after = p[p.length - 1];
  }
}

/** Every answer the fixture recorded, asked of `s` and compared with what the schema-3 store gave. */
function expectSameAnswers(s: StateStore): void {
  const now = answers.now;
  const keys = answers.keys.map(([type, hash]) => ({ type, hash }));
  const found = s.lookupMany(keys);
  expect(keys.map((k) => found.get(`${k.type}:${k.hash}`)?.id ?? null)).toEqual(answers.lookups);
  const entries = [...found.values()].sort((a, b) => a.id - b.id);
  expect(entries).toEqual([...entryById.values()]);

  for (const type of ['email', 'phone'] as const) {
    const hashes = keys.filter((k) => k.type === type).map((k) => k.hash);
    const got = s.lookupStored(type, hashes);
    // answers come in no promised order: compared in id order
    const order = [...got.at.keys()];
    const idAt = (j: number): number => found.get(`${type}:${hashes[got.at[j]]}`)?.id ?? -1;
    order.sort((a, b) => idAt(a) - idAt(b));
    const ids = order.map(idAt);
    expect(ids).toEqual([...answers.stored[type]].sort((a, b) => a - b));
    const rows = order.map((j) => ({
      status: ['', 'mapped', 'optout', 'invalid'][got.status[j]],
      due: got.due[j] === 1,
      r: Number.isNaN(got.r[j]) ? null : got.r[j],
      u: got.u[j],
      p: got.p[j],
      bucketId: got.bucketId[j],
    }));
    expect(rows).toEqual(expectedOf(ids, ['status', 'due', 'r', 'u', 'p', 'bucketId'] as const));
  }

  const due = walk<DueEntry>((after) => s.selectDue(now, after === null ? null : { r: after.r, id: after.id }, 97));
  expect(due).toEqual(expectedOf(answers.due, DUE_FIELDS));
  expect(s.countDue(now)).toBe(answers.countDue);
  expect(s.dueByDay(now, 10)).toEqual(answers.dueByDay);
  expect(s.dueDays()).toEqual(answers.dueDays);
  expect(walk<DueEntry>((after) => s.selectDueV2(after?.id ?? null, 89))).toEqual(
    expectedOf(answers.dueV2, DUE_FIELDS),
  );
  expect(s.countDueV2()).toBe(answers.countDueV2);
  expect(s.bucketEntries()).toEqual(answers.bucketEntries);
  // the sweep's candidates, whatever order the sweep takes them in
  const sweep = walk<OptoutCandidate>((after) => s.selectForOptoutCheck(101, after)).sort((a, b) => a.id - b.id);
  expect(sweep.map((c) => pick(c, SWEEP_FIELDS))).toEqual(expectedOf(answers.sweep, SWEEP_FIELDS));
  expect(s.countWithRawUid()).toBe(answers.countWithRawUid);
  expect(s.counts(now)).toEqual(answers.counts);
  expect([...s.exportEntries(333)]).toEqual(expectedOf(answers.export, EXPORT_FIELDS));
  expect(s.pendingChanges('remap', 0, 100_000)).toEqual(answers.remap);
  expect(s.pendingChanges('optout', 0, 100_000)).toEqual(answers.optout);
  expect(s.listRuns(100)).toEqual(answers.runs);
  expect(s.meta()).toEqual({ ...answers.meta, schemaVersion: 5 });
  expect(s.info().tailEntries).toBe(answers.tailEntries);
}

function rawRead<T>(path: string, read: (db: InstanceType<typeof Database>) => T): T {
  const db = new Database(path, { readonly: true });
  try {
    return read(db);
  } finally {
    db.close();
  }
}

const metaRows = (path: string) =>
  rawRead(path, (db) => db.prepare('SELECT key, value FROM meta ORDER BY key').raw().all() as [string, string][]);

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
    const path = fixtureCopy();
    const metaBefore = metaRows(path);
    const s = t.open(path);
    expectSameAnswers(s);
    expect(s.integrityCheck()).toBe('ok');
    s.close();
    const metaAfter = metaRows(path);
    expect(metaAfter).toEqual(metaBefore.map(([k, v]) => [k, k === 'schema_version' ? '5' : v]));
  });

  it('leaves schema 4: stored bytes, no first_mapped, its indexes, no table or mark of the upgrade', () => {
    const path = fixtureCopy();
    t.open(path).close();
    rawRead(path, (db) => {
      const rows = db.prepare('SELECT id, hash, u, p FROM entries ORDER BY id').raw().all();
      const stored = (text: unknown) => (text === null ? null : storedOf(text as string));
      expect(rows).toEqual(answers.entries.map((e) => [e[0], stored(e[2]), stored(e[4]), stored(e[5])]));
      const columns = (db.prepare('PRAGMA table_info(entries)').all() as { name: string }[]).map((c) => c.name);
      expect(columns).not.toContain('first_mapped');
      const indexes = db
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'entries' ORDER BY name")
        .pluck()
        .all();
      expect(indexes).toEqual(['entries_by_bucket', 'entries_due_v2']);
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
    const s = t.open(path);
    const mapped = [...entryById.values()].find((e) => e.status === 'mapped' && e.u !== null && e.bucketId === null);
    const other = [...entryById.values()].find((e) => e.status === 'mapped' && e.id > (mapped?.id ?? 0) + 10);
    if (mapped === undefined || other === undefined || other.u === null) throw new Error('no mapped entry');
    const now = answers.now;
    s.commitBatch(
      [
        { type: mapped.type, hash: mapped.hash, outcome: { kind: 'mapped', u: b64('new u'), p: mapped.u, r: now } },
        { type: 'email', hash: b64('brand new'), outcome: { kind: 'mapped', u: b64('nu'), p: null, r: now + 9 } },
      ],
      now,
    );
    // a scan for the raw UID: the upgraded entry holds its bytes
    expect(s.tombstoneByRawUid([{ rawUid: other.u, optedOutSinceMs: 42 }], now)).toBe(1);
    const m = s.lookupMany([
      { type: mapped.type, hash: mapped.hash },
      { type: 'email', hash: b64('brand new') },
      { type: other.type, hash: other.hash },
    ]);
    expect(m.get(`${mapped.type}:${mapped.hash}`)).toMatchObject({ id: mapped.id, u: b64('new u'), p: mapped.u });
    expect(m.get(`email:${b64('brand new')}`)).toMatchObject({ id: answers.entries.length + 1, u: b64('nu') });
    expect(m.get(`${other.type}:${other.hash}`)).toMatchObject({ status: 'optout', u: null, optedOutSinceMs: 42 });
    expect(s.integrityCheck()).toBe('ok');
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
      expect(() => t.open(path, { readonly: true })).toThrow(/has schema 3 and needs an upgrade to 5/);
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
