// The reader of a state file as it is: its records in id order, an earlier build's file refused, damage found.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatStateInfo } from '../../src/cli/state/state-info-text.js';
import { readStateInfo } from '../../src/pipeline/jobs/state-info.js';
import {
  type EntryTally,
  type EntryUpdate,
  openState,
  openStateReader,
  type StateReader,
} from '../../src/state/index.js';
import Database from '../helpers/sqlite-driver.js';
import { b64 } from './tmp-state.js';
import { lookupMany, type StoredEntry } from './lookups.js';

const dir = mkdtempSync(join(tmpdir(), 'uid2-state-file-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const DAY = 86_400;
const NOW = 1_800_000_000;
let n = 0;

/** Entries of every kind: mapped with and without a previous raw UID and due at spread days, opted out, invalid. */
function updates(): EntryUpdate[] {
  const out: EntryUpdate[] = [];
  for (let i = 0; i < 3_000; i++) {
    const type = i % 5 === 0 ? 'phone' : 'email';
    const hash = b64(`reader-${i}`);
    if (i % 11 === 0) out.push({ type, hash, outcome: { kind: 'invalid' } });
    else if (i % 13 === 0) out.push({ type, hash, outcome: { kind: 'optout' } });
    else {
      const p = i % 3 === 0 ? b64(`prev-${i}`) : null;
      out.push({ type, hash, outcome: { kind: 'mapped', u: b64(`uid-${i}`), p, r: NOW - 5 * DAY + (i % 10) * DAY } });
    }
  }
  return out;
}

let path: string;
let entries: StoredEntry[];

beforeAll(() => {
  path = join(dir, 'state.db');
  const store = openState(path, { envFingerprint: 'uid2:integ', tailEntries: 1_000 });
  const all = updates();
  for (let from = 0; from < all.length; from += 700) store.commitBatch(all.slice(from, from + 700), NOW - 10 * DAY);
  entries = [
    ...lookupMany(
      store,
      all.map((u) => ({ type: u.type, hash: u.hash })),
    ).values(),
  ].sort((a, b) => a.id - b.id);
  store.close();
});

function readWith<T>(file: string, read: (reader: StateReader) => T): T {
  const reader = openStateReader(file);
  try {
    return read(reader);
  } finally {
    reader.close();
  }
}

function tallied({ byStatus, withoutR, atMost: [now, soon] }: EntryTally) {
  return { byStatus, dueNow: now, dueSoon: soon - now, withoutR };
}

function answersOf(file: string, recordsPage?: number) {
  return readWith(file, (reader) => ({
    entries: [...reader.entries(recordsPage)],
    ...tallied(reader.tally([NOW, NOW + 2 * DAY], recordsPage)),
  }));
}

const expected = () => ({
  entries: entries.map((e) => ({ type: e.type, hash: e.hash, status: e.status, u: e.u, p: e.p, r: e.r })),
  byStatus: {
    mapped: entries.filter((e) => e.status === 'mapped').length,
    optout: entries.filter((e) => e.status === 'optout').length,
    invalid: entries.filter((e) => e.status === 'invalid').length,
  },
  dueNow: entries.filter((e) => e.r !== null && e.r <= NOW).length,
  dueSoon: entries.filter((e) => e.r !== null && e.r > NOW && e.r <= NOW + 2 * DAY).length,
  withoutR: entries.filter((e) => e.r === null).length,
});

describe('openStateReader', () => {
  it('reads every entry in id order and tallies them, whatever the page', () => {
    const want = expected();
    for (const c of [want.dueNow, want.dueSoon, want.withoutR, ...Object.values(want.byStatus)])
      expect(c).toBeGreaterThan(0);
    for (const page of [undefined, 1, 999, entries.length]) expect(answersOf(path, page)).toEqual(want);
  });

  it('a walk of records lets the caller query between two entries', () => {
    readWith(path, (reader) => {
      let seen = 0;
      for (const _ of reader.entries(100)) if (seen++ % 250 === 0) expect(reader.getMeta('api')).toBe('v3');
      expect(seen).toBe(entries.length);
    });
  });

  it("refuses an earlier build's file with one line that says how to rebuild it", () => {
    const old = join(dir, `old-${++n}.db`);
    const db = new Database(old);
    db.exec('CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)');
    db.prepare("INSERT INTO meta VALUES ('application', 'uid2-batch'), ('schema_version', '6')").run();
    db.close();
    expect(() => openStateReader(old)).toThrow(
      /was written by an earlier build of uid2-batch \(schema 6\), whose format this version does not read; rebuild it: map your input again with --state and a new file \(to keep what it holds, run `uid2-batch state export .*` with the build that wrote it first\)$/,
    );
  });

  it("refuses another program's database and a file that is not SQLite with one line", () => {
    const other = join(dir, `other-${++n}.db`);
    const db = new Database(other);
    db.exec('CREATE TABLE customers (email TEXT)');
    db.close();
    const text = join(dir, `text-${++n}.csv`);
    writeFileSync(text, 'email\nuser@example.com\n'.repeat(100));
    for (const path of [other, text]) {
      expect(() => openStateReader(path)).toThrow(
        `'${path}' is not a uid2-batch state file (not SQLite, damaged, or another program's database)`,
      );
    }
  });

  it('skips and counts an entry whose record fails its checksum, and says a damaged meta value', () => {
    const copy = join(dir, `damaged-${++n}.db`);
    const db = new Database(path);
    db.prepare('VACUUM INTO ?').run(copy);
    db.close();
    const raw = new Database(copy);
    const victim = entries[17].id;
    const record = raw.prepare('SELECT record FROM entries WHERE id = ?').pluck().get(victim) as Buffer;
    record[40] ^= 1;
    raw.prepare('UPDATE entries SET record = ? WHERE id = ?').run(record, victim);
    raw.prepare("UPDATE meta SET value = 'v2' WHERE key = 'api'").run();
    raw.close();
    readWith(copy, (reader) => {
      const read = [...reader.entries()];
      expect(read).toEqual(expected().entries.filter((_, i) => i !== 17));
      expect(reader.damaged()).toBe(1);
      expect(() => reader.getMeta('api')).toThrow(/is damaged \(meta value 'api' fails its checksum\)/);
      expect(() => reader.tally([NOW])).toThrow(/is damaged \(an entry record fails its checksum\)/);
    });
  });
});

describe('state info of the last run', () => {
  it('shows both its wall-clock start and the --now it was told', () => {
    const file = join(dir, `runs-${++n}.db`);
    const store = openState(file, { envFingerprint: 'uid2:integ' });
    const id = store.startRun('remap-due', '{}', NOW);
    store.finishRun(id, '{}', 0);
    store.close();
    const info = readStateInfo(file, NOW);
    expect(info.last_run?.now).toBe('2027-01-15T08:00:00Z');
    expect(Math.abs(Date.parse(info.last_run?.started_at ?? '') - Date.now())).toBeLessThan(60_000);
    expect(formatStateInfo(info)).toMatch(/last run: remap-due at \S+ \(now 2027-01-15T08:00:00Z\), exit 0/);
  });
});
