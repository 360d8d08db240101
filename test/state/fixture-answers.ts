// A committed state fixture (test/fixtures/state-v<N>) and the answers its store gave, asked again of an upgraded file.
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { expect } from 'vitest';
import Database from '../helpers/sqlite-driver.js';
import { b64 } from './tmp-state.js';
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

const FIXTURES = resolve(dirname(fileURLToPath(import.meta.url)), '../fixtures');
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

/** What the fixture's store answered (make-state-fixture.mjs): entries whole, other lists as ids. */
export interface Answers {
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

export interface StateFixture {
  answers: Answers;
  /** The recorded entries by id, as a lookup gives them. */
  entryById: Map<number, StateEntry>;
  /** Writes the fixture's state file (at the schema it was made with) to `path`; returns `path`. */
  copyTo(path: string): string;
  /** Every answer the fixture recorded, asked of `s` (a file now at `schemaVersion`) and compared. */
  expectSameAnswers(s: StateStore, schemaVersion: number): void;
  /**
   * Opens the copy at `path` with `open` (a writing open upgrades it), checks every answer and the file's
   * integrity, and that every meta row but schema_version is as it was before.
   */
  expectUpgradeKeeps(path: string, open: (path: string) => StateStore, schemaVersion: number): void;
  /**
   * Writes to an upgraded file through its store: an upgraded entry mapped again, a new entry, and another
   * upgraded entry tombstoned by its raw UID (a walk of the table); checks what lookups then give. Gives the id of
   * the tombstoned entry.
   */
  expectWritesAfterUpgrade(s: StateStore): number;
}

/** The fixture in test/fixtures/`name`: its answers, and its state file named after the schema it records. */
export function loadStateFixture(name: string): StateFixture {
  const dir = join(FIXTURES, name);
  const answers = JSON.parse(gunzipSync(readFileSync(join(dir, 'answers.json.gz'))).toString('utf8')) as Answers;
  const entryById = new Map<number, StateEntry>(
    answers.entries.map((values) => {
      const e = Object.fromEntries(ENTRY_FIELDS.map((f, i) => [f, values[i]])) as unknown as StateEntry;
      return [e.id, e];
    }),
  );
  const file = join(dir, `state-v${answers.meta.schemaVersion}.db.gz`);
  return {
    answers,
    entryById,
    copyTo(path) {
      writeFileSync(path, gunzipSync(readFileSync(file)), { mode: 0o600 });
      return path;
    },
    expectSameAnswers: (s, schemaVersion) => expectSameAnswers(s, answers, entryById, schemaVersion),
    expectUpgradeKeeps(path, open, schemaVersion) {
      const metaBefore = metaRows(path);
      const s = open(path);
      expectSameAnswers(s, answers, entryById, schemaVersion);
      expect(s.integrityCheck()).toBe('ok');
      s.close();
      const version = String(schemaVersion);
      expect(metaRows(path)).toEqual(metaBefore.map(([k, v]) => [k, k === 'schema_version' ? version : v]));
    },
    expectWritesAfterUpgrade: (s) => expectWritesAfterUpgrade(s, answers, entryById),
  };
}

function expectWritesAfterUpgrade(s: StateStore, answers: Answers, entryById: Map<number, StateEntry>): number {
  const all = [...entryById.values()];
  const mapped = all.find((e) => e.status === 'mapped' && e.u !== null && e.bucketId === null);
  const other = all.find((e) => e.status === 'mapped' && e.id > (mapped?.id ?? 0) + 10);
  if (mapped === undefined || other === undefined || other.u === null) throw new Error('no mapped entry');
  const now = answers.now;
  s.commitBatch(
    [
      { type: mapped.type, hash: mapped.hash, outcome: { kind: 'mapped', u: b64('new u'), p: mapped.u, r: now } },
      { type: 'email', hash: b64('brand new'), outcome: { kind: 'mapped', u: b64('nu'), p: null, r: now + 9 } },
    ],
    now,
  );
  // a walk of the table for the raw UID: the upgraded entry holds its bytes
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
  return other.id;
}

function pick<K extends string>(value: object, fields: readonly K[]): Record<K, unknown> {
  const v = value as Record<string, unknown>;
  return Object.fromEntries(fields.map((f) => [f, v[f]])) as Record<K, unknown>;
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

function expectSameAnswers(
  s: StateStore,
  answers: Answers,
  entryById: Map<number, StateEntry>,
  schemaVersion: number,
): void {
  /** The fixture's entries of these ids, with the fields an answer has. */
  const expectedOf = <K extends string>(ids: readonly number[], fields: readonly K[]): Record<K, unknown>[] =>
    ids.map((id) => pick(entryById.get(id) ?? { id }, fields));
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
  expect(s.meta()).toEqual({ ...answers.meta, schemaVersion });
  expect(s.info().tailEntries).toBe(answers.tailEntries);
}

/** Reads a state file through a read-only connection of its own, closed after `read`. */
export function rawRead<T>(path: string, read: (db: InstanceType<typeof Database>) => T): T {
  const db = new Database(path, { readonly: true });
  try {
    return read(db);
  } finally {
    db.close();
  }
}

/** A file's meta marks, in key order. */
export const metaRows = (path: string) =>
  rawRead(path, (db) => db.prepare('SELECT key, value FROM meta ORDER BY key').raw().all() as [string, string][]);

type Connection = InstanceType<typeof Database>;

/** The names of a file's tables or indexes, in order. */
export const names = (db: Connection, type: 'table' | 'index'): string[] =>
  db.prepare('SELECT name FROM sqlite_schema WHERE type = ? ORDER BY name').pluck().all(type) as string[];

/** The one number a counting statement gives. */
export const count = (db: Connection, sql: string): number => db.prepare(sql).pluck().get() as number;

/** A digest of a table's rows in order: compared rather than the rows, which hold megabytes of filters. */
function digestOf(db: Connection, table: string): string {
  const hash = createHash('sha256');
  for (const row of db.prepare(`SELECT * FROM ${table} ORDER BY 1, 2`).raw().iterate() as Iterable<unknown[]>) {
    // a blob as its hex, set apart from a text of the same characters
    hash.update(JSON.stringify(row.map((v) => (Buffer.isBuffer(v) ? { blob: v.toString('hex') } : v))));
  }
  return hash.digest('hex');
}

/** digestOf each of these tables. */
export const digestsOf = (db: Connection, tables: readonly string[]): Record<string, string> =>
  Object.fromEntries(tables.map((table) => [table, digestOf(db, table)]));

/** Every table's rows, and the schema: what a piece rolled back must leave as it found it. */
export const everyRow = (db: Connection): Record<string, string> =>
  digestsOf(db, ['sqlite_schema', ...names(db, 'table')]);
