import { afterAll, describe, expect, it } from 'vitest';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { writeWithHotJournal } from '../helpers/hot-journal.js';
import Database from '../helpers/sqlite-driver.js';
import {
  SCHEMA_VERSION,
  StateEnvMismatchError,
  StateJournalError,
  StateFormatError,
  StateNotFoundError,
  StateReadonlyError,
  StateSettingError,
  openState,
} from '../../src/state/index.js';
import { MMAP_ENV } from '../../src/state/open.js';
import { ENV, b64, setMetaAt, tmpStates } from './tmp-state.js';
import { countsOf, lookupHashes, lookupMany } from './lookups.js';

const t = tmpStates();
afterAll(() => t.cleanup());

describe('openState: creating and reopening', () => {
  it('creates a v3 state with its identity and reopens it with the entries kept', () => {
    const path = t.file();
    const s = t.open(path);
    const meta = s.meta();
    expect(meta).toMatchObject({ schemaVersion: SCHEMA_VERSION, envFingerprint: ENV, api: 'v3' });
    expect(Date.parse(meta.createdAt)).not.toBeNaN();
    s.commitBatch(
      [{ type: 'email', hash: b64('a'), outcome: { kind: 'mapped', u: b64('u'), p: null, r: 2_000 } }],
      1_000,
    );
    s.close();

    const again = t.open(path, { create: false });
    expect(again.meta()).toEqual(meta);
    expect(lookupMany(again, [{ type: 'email', hash: b64('a') }]).get(`email:${b64('a')}`)?.u).toBe(b64('u'));
    expect(countsOf(again)).toEqual({ entries: 1, mapped: 1, optout: 0, invalid: 0 });
  });

  it('records the api it was created for', () => {
    const s = t.open(t.file(), { api: 'v2' });
    expect(s.meta().api).toBe('v2');
    s.setMeta('api', 'v3');
    expect(s.meta().api).toBe('v3');
  });

  it('creates the file, its WAL and its shared-memory file readable by the owner only, whatever the umask', () => {
    const path = t.file();
    const old = process.umask(0o000);
    try {
      const s = t.open(path);
      s.commitBatch([{ type: 'phone', hash: b64('p'), outcome: { kind: 'invalid' } }], 1);
      for (const f of [path, `${path}-wal`, `${path}-shm`]) {
        expect(existsSync(f), f).toBe(true);
        expect(statSync(f).mode & 0o777, f).toBe(0o600);
      }
    } finally {
      process.umask(old);
    }
  });

  it('reads the same through a memory map', () => {
    const path = t.file();
    const w = t.open(path);
    w.commitBatch([{ type: 'email', hash: b64('m'), outcome: { kind: 'mapped', u: b64('mu'), p: null, r: 9 } }], 1);
    w.close();
    const mapped = t.open(path, { mmapMiB: 64, readonly: true });
    expect(lookupHashes(mapped, 'email', [b64('m')]).get(b64('m'))?.u).toBe(b64('mu'));
  });

  it.runIf(existsSync('/proc/self/maps'))(
    'maps the file into memory by default, not with mmapMiB 0 or UID2_BATCH_STATE_MMAP_MIB=0',
    () => {
      const path = t.file();
      const w = t.open(path);
      w.commitBatch([{ type: 'email', hash: b64('m'), outcome: { kind: 'mapped', u: b64('mu'), p: null, r: 9 } }], 1);
      w.close();
      // the process's mappings name the file while a store reads it through a map (Linux; its -shm is always mapped)
      const mapped = (): boolean =>
        readFileSync('/proc/self/maps', 'utf8')
          .split('\n')
          .some((line) => line.endsWith(` ${path}`));
      const readWith = (options: { mmapMiB?: number }, env: string | undefined): boolean => {
        const old = process.env[MMAP_ENV];
        if (env === undefined) delete process.env[MMAP_ENV];
        else process.env[MMAP_ENV] = env;
        try {
          const s = openState(path, { envFingerprint: ENV, readonly: true, ...options });
          try {
            expect(lookupHashes(s, 'email', [b64('m')]).get(b64('m'))?.u).toBe(b64('mu'));
            return mapped();
          } finally {
            s.close();
          }
        } finally {
          if (old === undefined) delete process.env[MMAP_ENV];
          else process.env[MMAP_ENV] = old;
        }
      };
      expect(mapped()).toBe(false);
      expect(readWith({}, undefined)).toBe(true);
      expect(mapped()).toBe(false);
      expect(readWith({ mmapMiB: 0 }, undefined)).toBe(false);
      expect(readWith({}, '0')).toBe(false);
      expect(readWith({}, ' 64 ')).toBe(true);
      // the option wins over the variable
      expect(readWith({ mmapMiB: 64 }, '0')).toBe(true);
      for (const bad of ['-1', '1.5', 'lots', '2GiB']) {
        expect(() => readWith({}, bad)).toThrow(StateSettingError);
        expect(() => readWith({}, bad)).toThrow(`${MMAP_ENV} must be a whole number of MiB`);
      }
    },
  );

  it('keeps the file in WAL mode', () => {
    const path = t.file();
    t.open(path);
    const raw = new Database(path, { readonly: true });
    try {
      expect(raw.pragma('journal_mode', { simple: true })).toBe('wal');
    } finally {
      raw.close();
    }
  });
});

describe('openState: a rollback journal left by a killed run', () => {
  function withHotJournal(): string {
    const path = t.file();
    writeWithHotJournal(t.file(), path);
    return path;
  }

  it('is named, with what to do, by a read-only open; a writing open rolls it back and goes on', () => {
    const path = withHotJournal();
    expect(statSync(path).size).toBeGreaterThan(0);
    let caught: unknown;
    try {
      openState(path, { envFingerprint: ENV, readonly: true });
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(StateJournalError);
    expect((caught as Error).message).toBe(
      `state file ${path} has a rollback journal (${path}-journal) left by a run that was killed while it wrote; ` +
        `a command that writes the file rolls it back (uid2-batch state checkpoint ${path}), then read it again`,
    );
    // the file was empty before the killed write: rolled back, it is made a state
    const s = t.open(path);
    expect(existsSync(`${path}-journal`)).toBe(false);
    expect(countsOf(s)).toEqual({ entries: 0, mapped: 0, optout: 0, invalid: 0 });
    s.close();
    const again = t.open(path, { readonly: true });
    expect(again.meta().envFingerprint).toBe(ENV);
  });
});

describe('openState: refusing what it must not open', () => {
  it('refuses a file made for another environment, naming both and what to do', () => {
    const path = t.file();
    t.open(path).close();
    let caught: unknown;
    try {
      openState(path, { envFingerprint: 'uid2:prod' });
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(StateEnvMismatchError);
    const message = (caught as Error).message;
    expect(message).toContain(path);
    expect(message).toContain(`made for environment ${ENV}`);
    expect(message).toContain('this run is for uid2:prod');
    expect(message).toContain('use another --state file');
  });

  it('refuses a missing file when it must not create one, and in read-only mode', () => {
    const path = t.file();
    expect(() => openState(path, { envFingerprint: ENV, create: false })).toThrow(StateNotFoundError);
    expect(() => openState(path, { envFingerprint: ENV, readonly: true })).toThrow(StateNotFoundError);
    expect(existsSync(path)).toBe(false);
    expect(() => openState(path, { envFingerprint: ENV, create: false })).toThrow(/does not exist/);
  });

  it('refuses a file that is not SQLite, and leaves it as it was', () => {
    const path = t.file('notes.csv');
    const text = 'id,email\n1,someone@example.com\n'.repeat(200);
    writeFileSync(path, text);
    expect(() => openState(path, { envFingerprint: ENV })).toThrow(StateFormatError);
    expect(() => openState(path, { envFingerprint: ENV })).toThrow(/not a uid2-batch state \(not a SQLite database/);
    expect(statSync(path).size).toBe(text.length);
  });

  it('refuses another program’s SQLite database without changing its journal mode', () => {
    const path = t.file('other.db');
    const other = new Database(path);
    other.exec('CREATE TABLE things (x INTEGER)');
    other.close();
    expect(() => openState(path, { envFingerprint: ENV })).toThrow(/is a SQLite database but not a uid2-batch state/);
    const check = new Database(path, { readonly: true });
    try {
      expect(check.pragma('journal_mode', { simple: true })).toBe('delete');
    } finally {
      check.close();
    }
  });

  it('says so when the directory of a new file does not exist', () => {
    const path = `${t.dir}/no-such-dir/s.db`;
    expect(() => openState(path, { envFingerprint: ENV })).toThrow(
      `cannot create state file ${path}: its directory does not exist`,
    );
  });

  it('refuses a directory', () => {
    expect(() => openState(t.dir, { envFingerprint: ENV })).toThrow(/not a regular file/);
  });

  it('makes a new file of 8 KiB pages (whole records leave less of a page unused than in 4 KiB ones)', () => {
    const path = t.file();
    t.open(path).close();
    const raw = new Database(path, { readonly: true });
    expect(raw.pragma('page_size', { simple: true })).toBe(8192);
    raw.close();
  });

  it("refuses an earlier build's file (schemas 1 to 6, no checksums) with one line that says how to rebuild it", () => {
    for (const version of [3, 6]) {
      const path = t.file();
      const raw = new Database(path);
      raw.exec('CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)');
      raw.exec('CREATE TABLE entries (id INTEGER PRIMARY KEY, record BLOB NOT NULL)');
      raw
        .prepare('INSERT INTO meta VALUES (?, ?), (?, ?), (?, ?)')
        .run('application', 'uid2-batch', 'schema_version', String(version), 'env_fingerprint', ENV);
      raw.close();
      expect(() => openState(path, { envFingerprint: ENV })).toThrow(StateFormatError);
      expect(() => openState(path, { envFingerprint: ENV, readonly: true })).toThrow(
        new RegExp(
          `^state file .* was written by an earlier build of uid2-batch \\(schema ${version}\\), whose format this version does not read; ` +
            'rebuild it: map your input again with --state and a new file \\(to keep what it holds, run `uid2-batch state export .*` with the build that wrote it first\\)$',
        ),
      );
    }
  });

  it("refuses an earlier build's file with checksums (an older schema) with the same line", () => {
    const path = t.file();
    t.open(path).close();
    setMetaAt(path, 'schema_version', String(SCHEMA_VERSION - 1));
    for (const readonly of [false, true]) {
      expect(() => openState(path, { envFingerprint: ENV, readonly })).toThrow(
        new RegExp(`was written by an earlier build of uid2-batch \\(schema ${SCHEMA_VERSION - 1}\\), .*rebuild it`),
      );
    }
  });

  it('refuses a state written by a newer schema', () => {
    const path = t.file();
    t.open(path).close();
    setMetaAt(path, 'schema_version', String(SCHEMA_VERSION + 1));
    expect(() => openState(path, { envFingerprint: ENV })).toThrow(/newer uid2-batch.*upgrade uid2-batch/);
  });

  it('initializes an empty file (a run killed right after creating it) but not when told not to create', () => {
    const path = t.file();
    writeFileSync(path, '');
    expect(() => openState(path, { envFingerprint: ENV, create: false })).toThrow(/is empty/);
    const s = t.open(path);
    expect(s.meta().envFingerprint).toBe(ENV);
  });

  it('never lets setMeta change what the file is', () => {
    const s = t.open(t.file());
    expect(() => s.setMeta('env_fingerprint', 'uid2:prod')).toThrow(/cannot be changed/);
    expect(() => s.setMeta('schema_version', '9')).toThrow(/cannot be changed/);
    expect(() => s.setMeta('api', 'v4')).toThrow(/v2 or v3/);
    s.setMeta('last_buckets_check', '2025-01-01T00:00:00');
    expect(s.getMeta('last_buckets_check')).toBe('2025-01-01T00:00:00');
    expect(s.getMeta('nothing')).toBeNull();
    expect(s.meta().envFingerprint).toBe(ENV);
  });
});

describe('read-only (dry runs)', () => {
  it('reads, and refuses every write with a clear message', () => {
    const path = t.file();
    const w = t.open(path);
    w.commitBatch([{ type: 'email', hash: b64('x'), outcome: { kind: 'mapped', u: b64('ux'), p: null, r: 50 } }], 10);
    w.close();
    const ro = t.open(path, { readonly: true });
    expect(ro.readonly).toBe(true);
    expect(ro.countDue(100)).toBe(1);
    expect(() => ro.commitBatch([{ type: 'email', hash: b64('y'), outcome: { kind: 'invalid' } }], 1)).toThrow(
      StateReadonlyError,
    );
    expect(() => ro.startRun('remap-due', '{}')).toThrow(/read-only \(dry run\)/);
    expect(countsOf(ro).entries).toBe(1);
  });
});
