import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from '../helpers/sqlite-driver.js';
import { afterAll, describe, expect, it } from 'vitest';
import {
  type DueEntry,
  type EntryUpdate,
  type OptoutCandidate,
  SCHEMA_VERSION,
  type StateEntry,
  type StateStore,
} from '../../src/state/index.js';
import { storedOf } from '../../src/state/stored-bytes.js';
import { upgradeToV3Step } from '../../src/state/upgrade-v3.js';
import { buildLegacyState, type LegacyWriter } from './legacy-state.js';
import { entryRowsOf } from './records.js';
import { ENV, b64, levelPairsOf, tmpStates } from './tmp-state.js';

const t = tmpStates('uid2-upgrade-');
afterAll(() => t.cleanup());

const DAY = 86_400;
const T0 = 1_767_225_600; // a UTC midnight
const N = 3_000;

/** What today's code writes over a few runs: v3 and v2 entries, tombstones, invalids, checks, a journal, odd hashes. */
function fillSchema2(w: LegacyWriter): void {
  const updates: EntryUpdate[] = [];
  for (let i = 0; i < N; i++) {
    const type = i % 3 === 0 ? 'phone' : 'email';
    // a few hashes that are not base64 (stored as text and kept as text)
    const hash = i % 250 === 7 ? `not base64 ${i}` : b64(`h${i}`);
    if (i % 17 === 0) updates.push({ type, hash, outcome: { kind: 'invalid' } });
    else if (i % 11 === 0)
      updates.push({ type, hash, outcome: { kind: 'optout', optedOutSinceMs: i % 2 ? 1_700_000_000_000 + i : null } });
    else if (i % 13 === 0)
      updates.push({
        type,
        hash,
        outcome: { kind: 'mapped', u: b64(`v2u${i}`), p: null, r: null, bucketId: `b${i % 5}` },
      });
    else
      updates.push({
        type,
        hash,
        outcome: {
          kind: 'mapped',
          u: `${b64(`u${i}`).slice(0, 43)}A`,
          p: i % 4 === 0 ? b64(`p${i}`) : null,
          r: T0 + (i % 9) * DAY,
        },
      });
  }
  w.commit(updates.slice(0, 1_000), T0 - 2 * DAY);
  w.commit(updates.slice(1_000), T0 - DAY);
  // the same hash under the other type, and a re-map that keeps first_mapped
  w.commit(
    [{ type: 'email', hash: b64('h0'), outcome: { kind: 'mapped', u: b64('other-type'), p: null, r: T0 + DAY } }],
    T0 - DAY,
  );
  w.commit(
    [{ type: 'email', hash: b64('h1'), outcome: { kind: 'mapped', u: b64('again'), p: b64('u1'), r: T0 + 2 * DAY } }],
    T0,
  );
  w.db
    .prepare('UPDATE entries SET last_optout_check = ? WHERE id % 7 = 0 AND (u IS NOT NULL OR p IS NOT NULL)')
    .run(T0 - 3 * DAY);
  w.db
    .prepare('UPDATE entries SET last_optout_check = ? WHERE id % 7 = 1 AND (u IS NOT NULL OR p IS NOT NULL)')
    .run(T0 - 5 * DAY);
  w.db.prepare("UPDATE entries SET due = 1 WHERE bucket_id = 'b1'").run();
  const journal = w.db.prepare('INSERT INTO pending_changes (run_id, kind, row, created_at) VALUES (?, ?, ?, ?)');
  for (let i = 0; i < 20; i++) journal.run(1, i % 2 ? 'remap' : 'optout', `{"row":${i}}`, T0);
  w.db.prepare("INSERT INTO runs (command, args, pid, started_at) VALUES ('map', '[]', 1, ?)").run(T0);
}

interface Answers {
  entries: StateEntry[];
  due: number[];
  sweep: number[];
  dueV2: number[];
  remap: string[];
  optout: string[];
}

/** The answers read straight from a schema-2 file with the SQL of today's code. */
function legacyAnswers(path: string, now: number): Answers {
  const db = new Database(path, { readonly: true });
  try {
    const rows = db.prepare('SELECT * FROM entries ORDER BY id').all() as Record<string, unknown>[];
    const entries = rows.map(
      (r): StateEntry => ({
        id: r.id as number,
        type: r.type === 0 ? 'email' : 'phone',
        hash: r.hash as string,
        status: (['', 'mapped', 'optout', 'invalid'] as const)[r.status as number] as StateEntry['status'],
        u: r.u as string | null,
        p: r.p as string | null,
        r: r.r as number | null,
        bucketId: r.bucket_id as string | null,
        lastMappedS: r.last_mapped as number | null,
        lastOptoutCheckS: r.last_optout_check as number | null,
        optedOutSinceMs: r.opted_out_since as number | null,
        due: r.due === 1,
      }),
    );
    const ids = (sql: string, ...params: number[]) =>
      db
        .prepare(sql)
        .pluck()
        .all(...params) as number[];
    return {
      entries,
      due: ids('SELECT id FROM entries WHERE r <= ? ORDER BY r, id', now),
      sweep: ids('SELECT id FROM entries WHERE u IS NOT NULL OR p IS NOT NULL ORDER BY id'),
      dueV2: ids('SELECT id FROM entries WHERE due = 1 ORDER BY id'),
      remap: db.prepare("SELECT row FROM pending_changes WHERE kind = 'remap' ORDER BY id").pluck().all() as string[],
      optout: db.prepare("SELECT row FROM pending_changes WHERE kind = 'optout' ORDER BY id").pluck().all() as string[],
    };
  } finally {
    db.close();
  }
}

function walk<T extends { id: number }>(page: (after: T | null) => T[]): number[] {
  const out: number[] = [];
  let after: T | null = null;
  for (;;) {
    const p = page(after);
    out.push(...p.map((e) => e.id));
    if (p.length === 0) return out;
    after = p[p.length - 1];
  }
}

function storeAnswers(s: StateStore, now: number, keysOf: StateEntry[]): Answers {
  const found = s.lookupMany(keysOf.map((e) => ({ type: e.type, hash: e.hash })));
  return {
    entries: keysOf.map((e) => found.get(`${e.type}:${e.hash}`)).filter((e): e is StateEntry => e !== undefined),
    due: walk<DueEntry>((after) => s.selectDue(now, after === null ? null : { r: after.r, id: after.id }, 97)),
    // the sweep's candidates, whatever order the sweep takes them in
    sweep: walk<OptoutCandidate>((after) => s.selectForOptoutCheck(101, after)).sort((a, b) => a - b),
    dueV2: walk<DueEntry>((after) => s.selectDueV2(after?.id ?? null, 89)),
    remap: s.pendingChanges('remap').map((c) => c.row),
    optout: s.pendingChanges('optout').map((c) => c.row),
  };
}

describe('upgrade of a schema-2 file to the current schema, through each one between', () => {
  it('gives the same answers: lookups, due selection, opt-out sweep candidates, v2 due, journal', () => {
    const path = t.file();
    buildLegacyState(path, 2, ENV, fillSchema2);
    const now = T0 + 4 * DAY;
    const before = legacyAnswers(path, now);
    expect(before.entries.length).toBe(N + 1);
    expect(before.due.length).toBeGreaterThan(100);

    const s = t.open(path);
    expect(s.meta().schemaVersion).toBe(SCHEMA_VERSION);
    const after = storeAnswers(s, now, before.entries);
    expect(after.entries).toEqual(before.entries);
    expect(after.due).toEqual(before.due);
    expect(after.sweep).toEqual(before.sweep);
    expect(after.dueV2).toEqual(before.dueV2);
    expect(after.remap).toEqual(before.remap);
    expect(after.optout).toEqual(before.optout);
    expect(s.countDue(now)).toBe(before.due.length);
    expect(s.listRuns(5)).toHaveLength(1);
    expect(s.integrityCheck()).toBe('ok');

    // and it goes on working: an update of an old entry, a new entry
    s.commitBatch(
      [
        { type: 'email', hash: b64('h1'), outcome: { kind: 'optout' } },
        { type: 'email', hash: b64('brand new'), outcome: { kind: 'mapped', u: b64('nu'), p: null, r: now + DAY } },
      ],
      now,
    );
    const m = s.lookupMany([
      { type: 'email', hash: b64('h1') },
      { type: 'email', hash: b64('brand new') },
    ]);
    expect(m.get(`email:${b64('h1')}`)).toMatchObject({ status: 'optout', u: null, lastMappedS: T0 });
    expect(m.get(`email:${b64('brand new')}`)).toMatchObject({ status: 'mapped', u: b64('nu'), id: N + 2 });
  });

  it('leaves one entries table with the stored form of the same values, and every entry in the main key level', () => {
    const path = t.file();
    buildLegacyState(path, 2, ENV, fillSchema2);
    const before = legacyAnswers(path, T0);
    t.open(path).close();
    const db = new Database(path, { readonly: true });
    try {
      // schema 6: each entry's values in its record
      const rows = entryRowsOf(db).map((e) => [e.id, e.hash, e.u, e.p]);
      const stored = (text: string | null) => (text === null ? null : storedOf(text));
      expect(rows).toEqual(before.entries.map((e) => [e.id, storedOf(e.hash), stored(e.u), stored(e.p)]));
      expect(db.prepare("SELECT count(*) FROM sqlite_schema WHERE name LIKE 'entries_v_'").pluck().get()).toBe(0);
      expect(db.prepare("SELECT count(*) FROM meta WHERE key = 'upgrade_copied'").pluck().get()).toBe(0);
      expect(db.prepare("SELECT count(*) FROM meta WHERE key = 'upgrade_keys_copied'").pluck().get()).toBe(0);
      expect(db.prepare("SELECT count(*) FROM sqlite_schema WHERE name IN ('keys', 'keys_recent')").pluck().get()).toBe(
        0,
      );
    } finally {
      db.close();
    }
    expect(levelPairsOf(path).length).toBe(N + 1);
  });

  it('resumes an upgrade a killed run left half done, and a read-only open refuses the file meanwhile', () => {
    const path = t.file();
    buildLegacyState(path, 2, ENV, fillSchema2);
    const now = T0 + 4 * DAY;
    const before = legacyAnswers(path, now);
    // what a run killed after three pieces leaves: the new table part filled, the old one still in place
    const db = new Database(path);
    for (let i = 0; i < 3; i++) expect(db.transaction(() => upgradeToV3Step(db, 1_000)).immediate()).toBe(false);
    db.close();
    expect(() => t.open(path, { readonly: true })).toThrow(`has schema 2 and needs an upgrade to ${SCHEMA_VERSION}`);

    const s = t.open(path);
    expect(s.meta().schemaVersion).toBe(SCHEMA_VERSION);
    expect(storeAnswers(s, now, before.entries)).toEqual(before);
    expect(s.integrityCheck()).toBe('ok');
  });
});

describe('an upgrade killed by SIGKILL', () => {
  it('is finished by the next writing open, with the same answers', async () => {
    // the child runs the real module compiled on its own inside the project (so `better-sqlite3` resolves)
    const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
    mkdirSync(join(root, '.tmp'), { recursive: true });
    const work = mkdtempSync(join(root, '.tmp', 'state-upgrade-kill-'));
    const child: { pid?: number; done?: boolean } = {};
    try {
      writeFileSync(
        join(work, 'tsconfig.json'),
        JSON.stringify({
          extends: join(root, 'tsconfig.json'),
          compilerOptions: {
            outDir: join(work, 'build'),
            rootDir: join(root, 'src'),
            sourceMap: false,
            declaration: false,
          },
          include: [join(root, 'src/state/**/*.ts')],
        }),
      );
      const tsc = spawnSync(
        process.execPath,
        [join(root, 'node_modules/typescript/bin/tsc'), '-p', join(work, 'tsconfig.json')],
        { encoding: 'utf8' },
      );
      expect(tsc.status, `${tsc.stdout}${tsc.stderr}`).toBe(0);
      writeFileSync(
        join(work, 'upgrader.mjs'),
        `import { openState } from './build/state/index.js';\nopenState(process.argv[2], { envFingerprint: '${ENV}' }).close();\n`,
      );

      const path = join(work, 'big.db');
      const n = 160_000;
      buildLegacyState(path, 2, ENV, (w) => {
        const updates: EntryUpdate[] = [];
        for (let i = 0; i < n; i++) {
          updates.push({
            type: i % 3 ? 'email' : 'phone',
            hash: b64(`big${i}`),
            outcome: { kind: 'mapped', u: b64(`bu${i}`), p: null, r: T0 + (i % 7) * DAY },
          });
        }
        w.commit(updates, T0 - DAY);
      });
      const now = T0 + 3 * DAY;
      const before = legacyAnswers(path, now);

      // killed once at least one piece of 100,000 entries is committed and before the swap: first in the step to
      // schema 3, then (a second run) in the step to schema 4
      const killMidway = async (step: 'entries_v3' | 'entries_v4'): Promise<void> => {
        const proc = spawn(process.execPath, [join(work, 'upgrader.mjs'), path], { stdio: 'ignore' });
        child.pid = proc.pid;
        child.done = false;
        const exited = new Promise<void>((resolveExit) => proc.on('exit', () => resolveExit()));
        const probe = new Database(path, { readonly: true });
        let killedMidway = false;
        try {
          for (let i = 0; i < 6_000 && proc.exitCode === null; i++) {
            const copied = probe.prepare("SELECT value FROM meta WHERE key = 'upgrade_copied'").pluck().get() as
              | string
              | undefined;
            const inStep = probe.prepare('SELECT count(*) FROM sqlite_schema WHERE name = ?').pluck().get(step) === 1;
            if (inStep && copied !== undefined && Number(copied) >= 100_000) {
              proc.kill('SIGKILL');
              killedMidway = true;
              break;
            }
            await new Promise((r) => setTimeout(r, 5));
          }
        } finally {
          probe.close();
        }
        await exited;
        child.done = true;
        expect(killedMidway, step).toBe(true);
      };
      await killMidway('entries_v3');
      expect(() => t.open(path, { readonly: true })).toThrow(`has schema 2 and needs an upgrade to ${SCHEMA_VERSION}`);
      await killMidway('entries_v4');
      expect(() => t.open(path, { readonly: true })).toThrow(`has schema 3 and needs an upgrade to ${SCHEMA_VERSION}`);

      const s = t.open(path);
      expect(s.meta().schemaVersion).toBe(SCHEMA_VERSION);
      expect(storeAnswers(s, now, before.entries)).toEqual(before);
      expect(s.integrityCheck()).toBe('ok');
      s.close();
    } finally {
      if (child.pid !== undefined && child.done !== true) {
        try {
          process.kill(child.pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
      rmSync(work, { recursive: true, force: true });
    }
  }, 120_000);
});
