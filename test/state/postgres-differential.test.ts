import { afterAll, describe, expect, it } from 'vitest';
import type { StateBackend, StateRecord } from '../../src/state/backend.js';
import { openStateReader } from '../../src/state/index.js';
import { openPostgresState } from '../../src/state/postgres/open.js';
import { statusOfCode, TYPE_OF_CODE } from '../../src/state/schema.js';
import type { StateStore } from '../../src/state/store.js';
import type { DiiType } from '../../src/identity/index.js';
import type { EntryUpdate, ExportedEntry, StoredEntries } from '../../src/state/types.js';
import { usePostgres } from '../helpers/postgres.js';
import { seeded } from '../helpers/seeded-random.js';
import { entryRowsAt } from './records.js';
import { b64, ENV, tmpStates } from './tmp-state.js';

const pg = usePostgres();
const files = tmpStates('uid2-pg-diff-');
afterAll(() => files.cleanup());

const TYPES: DiiType[] = ['email', 'phone'];

/** A lookup's answers by position, so that two stores' answers compare whatever their order. */
function answers(e: StoredEntries): unknown[] {
  return [...e.at]
    .map((at, i) => ({ at, status: e.status[i], due: e.due[i], r: e.r[i], u: e.u[i], p: e.p[i], b: e.bucketId[i] }))
    .sort((a, b) => a.at - b.at);
}

const text = (v: Uint8Array | string | null): string | null =>
  v === null || typeof v === 'string' ? v : Buffer.from(v).toString('base64');

/** Every value of every entry of a state file, as readRecords gives a database's. */
function fileRecords(path: string): StateRecord[] {
  return entryRowsAt(path).map((e) => ({
    type: TYPE_OF_CODE[e.type],
    hash: text(e.hash) as string,
    status: statusOfCode(e.status),
    due: e.due,
    u: text(e.u),
    p: text(e.p),
    r: e.r,
    bucketId: e.bucketId,
    lastMappedS: e.lastMappedS,
    lastOptoutCheckS: e.lastOptoutCheckS,
    optedOutSinceMs: e.optedOutSinceMs,
  }));
}

const byKey = (a: ExportedEntry, b: ExportedEntry): number =>
  a.type === b.type ? (a.hash < b.hash ? -1 : a.hash > b.hash ? 1 : 0) : a.type < b.type ? -1 : 1;

describe('PostgreSQL state against the state file: the same commits, the same state', () => {
  it('gives the same lookups, due lists, sweeps and exports after the same random batches', async () => {
    const random = seeded(2914);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)];
    const hashes = Array.from({ length: 120 }, (_, i) => b64(`h${i}`));
    const raw = Array.from({ length: 60 }, (_, i) => b64(`u${i}`));
    const path = files.file();
    const file: StateStore = files.open(path, { envFingerprint: ENV });
    const db: StateBackend = await openPostgresState(pg.schemaUrl(), { envFingerprint: ENV });
    try {
      let now = 1_700_000_000;
      for (let batch = 0; batch < 40; batch++) {
        now += Math.floor(random() * 40_000);
        const updates: EntryUpdate[] = [];
        const size = 1 + Math.floor(random() * 60);
        for (let i = 0; i < size; i++) {
          const x = random();
          const outcome: EntryUpdate['outcome'] =
            x < 0.6
              ? {
                  kind: 'mapped',
                  u: pick(raw),
                  p: random() < 0.3 ? pick(raw) : null,
                  r: random() < 0.85 ? now + Math.floor((random() - 0.2) * 5 * 86_400) : null,
                  bucketId: random() < 0.5 ? `b${Math.floor(random() * 4)}` : null,
                }
              : x < 0.85
                ? { kind: 'optout', ...(random() < 0.5 ? { optedOutSinceMs: now * 1000 - 5 } : {}) }
                : { kind: 'invalid' };
          updates.push({ type: pick(TYPES), hash: pick(hashes), outcome });
        }
        file.commitBatch(updates, now);
        await db.commitBatch(updates, now);
        if (batch % 7 === 3) {
          // the same sweep step on both: checks of the same entries (found by hash: ids differ), then a tombstone
          const fileCands = file.selectForOptoutCheck(1000, null);
          const dbCands = await db.selectForOptoutCheck(1000, null);
          const checked = new Set(fileCands.filter(() => random() < 0.4).map((c) => `${c.type}:${c.hash}`));
          file.recordOptoutChecks(
            fileCands.filter((c) => checked.has(`${c.type}:${c.hash}`)).map((c) => c.id),
            now,
          );
          await db.recordOptoutChecks(
            dbCands.filter((c) => checked.has(`${c.type}:${c.hash}`)).map((c) => c.id),
            now,
          );
          const optedOut = [{ rawUid: pick(raw), optedOutSinceMs: now * 1000 }];
          expect(await db.tombstoneByRawUid(optedOut, now)).toBe(file.tombstoneByRawUid(optedOut, now));
        }
      }
      for (const type of TYPES) {
        const asked = [...hashes, hashes[0]];
        expect(answers(await db.lookupStored(type, asked))).toEqual(answers(file.lookupStored(type, asked)));
      }
      for (const at of [now - 86_400, now, now + 3 * 86_400]) {
        expect(await db.countDue(at)).toBe(file.countDue(at));
        expect(await db.dueByDay(at, 6)).toEqual(file.dueByDay(at, 6));
        const dbDue = [];
        for (let page = await db.selectDue(at, null, 7); page.length > 0; ) {
          dbDue.push(...page);
          page = await db.selectDue(at, page[page.length - 1], 7);
        }
        const fileDue = file.selectDue(at, null, 100_000);
        const strip = (d: { type: string; hash: string; u: unknown; p: unknown; r: unknown; bucketId: unknown }) =>
          `${d.type} ${d.hash} ${d.u} ${d.p} ${d.r} ${d.bucketId}`;
        expect(dbDue.map(strip).sort()).toEqual(fileDue.map(strip).sort());
        // the same set (compared sorted above): the file's by its due lists (day of r, then id), the database's in
        // id order (it keeps no index on r, and walks its primary key)
        for (let i = 1; i < dbDue.length; i++) expect(dbDue[i].id).toBeGreaterThan(dbDue[i - 1].id);
        const later = fileRecords(path).filter((e) => e.r !== null && e.r > at);
        const earliest = later.length === 0 ? null : Math.min(...later.map((e) => e.r as number));
        expect(await db.firstDueDay(at)).toBe(earliest === null ? null : Math.floor(earliest / 86_400) * 86_400);
      }
      expect(await db.countWithRawUid()).toBe(file.countWithRawUid());
      const reader = openStateReader(path);
      try {
        const fileEntries = [...reader.entries()].sort(byKey);
        const dbEntries: ExportedEntry[] = [];
        for await (const e of db.entries()) dbEntries.push(e);
        expect(dbEntries.sort(byKey)).toEqual(fileEntries);
        const bounds = [now - 86_400, now, now + 86_400];
        expect(await db.tally(bounds)).toEqual(reader.tally(bounds));
      } finally {
        reader.close();
      }
      // every value, those no lookup or export shows too (times of the last mapping, check and opt-out)
      const dbRecords = (await db.readRecords(0, 100_000)).records;
      expect(dbRecords.sort(byKey)).toEqual(fileRecords(path).sort(byKey));
    } finally {
      await db.close();
    }
  });

  it('loses no answer when two runs commit overlapping keys at once', async () => {
    const url = pg.schemaUrl();
    const a = await openPostgresState(url, { envFingerprint: ENV });
    const b = await openPostgresState(url, { envFingerprint: ENV });
    try {
      const keys = Array.from({ length: 3000 }, (_, i) => b64(`k${i}`));
      const random = seeded(77);
      const shuffled = (): string[] => [...keys].sort(() => random() - 0.5);
      const batches = (xs: string[], fn: (hash: string) => EntryUpdate): EntryUpdate[][] =>
        Array.from({ length: Math.ceil(xs.length / 500) }, (_, i) => xs.slice(i * 500, i * 500 + 500).map(fn));
      // a maps every key at 100, b finds every key opted out at 200: whichever commits a key last, the other's
      // answer is kept in it (an opt-out keeps the last mapped time; a mapping clears the opt-out)
      const run = async (s: StateBackend, list: EntryUpdate[][], now: number): Promise<void> => {
        for (const batch of list) await s.commitBatch(batch, now);
      };
      await Promise.all([
        run(
          a,
          batches(shuffled(), (hash) => ({ type: 'email', hash, outcome: { kind: 'mapped', u: 'u', p: null, r: 1 } })),
          100,
        ),
        run(
          b,
          batches(shuffled(), (hash) => ({ type: 'email', hash, outcome: { kind: 'optout', optedOutSinceMs: 5 } })),
          200,
        ),
      ]);
      const records = [];
      for (let after = 0; ; ) {
        const page = await a.readRecords(after, 1000);
        if (page.records.length === 0) break;
        records.push(...page.records);
        after = page.last;
      }
      expect(records).toHaveLength(keys.length);
      for (const r of records) {
        if (r.status === 'optout') expect([r.lastMappedS, r.optedOutSinceMs, r.u]).toEqual([100, 5, null]);
        else expect([r.status, r.lastMappedS, r.optedOutSinceMs, r.u]).toEqual(['mapped', 100, null, 'u']);
      }
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('loses no answer when two runs update the same stored entries at once', async () => {
    const url = pg.schemaUrl();
    const a = await openPostgresState(url, { envFingerprint: ENV });
    const b = await openPostgresState(url, { envFingerprint: ENV });
    try {
      const keys = Array.from({ length: 3000 }, (_, i) => b64(`s${i}`));
      const all = (outcome: EntryUpdate['outcome']): EntryUpdate[] =>
        keys.map((hash) => ({ type: 'email', hash, outcome }));
      await a.commitBatch(all({ kind: 'mapped', u: 'u', p: null, r: 1 }), 10);
      const random = seeded(91);
      const inBatches = (updates: EntryUpdate[]): EntryUpdate[][] => {
        const shuffled = [...updates].sort(() => random() - 0.5);
        return Array.from({ length: 6 }, (_, i) => shuffled.slice(i * 500, i * 500 + 500));
      };
      const run = async (s: StateBackend, list: EntryUpdate[][], now: number): Promise<void> => {
        for (const batch of list) await s.commitBatch(batch, now);
      };
      // an opt-out (since 5) and an invalid answer: in either order the entry keeps the opt-out's time, which an
      // update written over a row changed since it was read would lose
      await Promise.all([
        run(a, inBatches(all({ kind: 'optout', optedOutSinceMs: 5 })), 20),
        run(b, inBatches(all({ kind: 'invalid' })), 30),
      ]);
      const { records } = await a.readRecords(0, 10_000);
      expect(records).toHaveLength(keys.length);
      expect(records.filter((r) => r.optedOutSinceMs !== 5 || r.lastMappedS !== 10)).toEqual([]);
    } finally {
      await a.close();
      await b.close();
    }
  });
});
