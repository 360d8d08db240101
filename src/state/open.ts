/** Opens a state file: for a run (openState), or to read it as it is, of any environment (openStateReader). */
import { chmodSync, closeSync, fchmodSync, openSync, statSync, type Stats } from 'node:fs';
import type Database from 'better-sqlite3';
import {
  StateDamagedError,
  StateEnvMismatchError,
  StateError,
  StateFormatError,
  StateJournalError,
  StateNotFoundError,
  StateSettingError,
} from './errors.js';
import { errnoOf, StateAccessError, stateAccessError } from './access.js';
import { ChecksumError } from './checksum.js';
import { RecordFormatError } from './entry-record.js';
import { metaValue, setMetaValue } from './meta-values.js';
import { sqliteDriver } from './sqlite-driver.js';
import { APPLICATION_ID, META_KEYS, SCHEMA, SCHEMA_VERSION } from './schema.js';
import { StateStore } from './store.js';
import type { OpenStateOptions } from './types.js';

type Connection = Database.Database;

const OWNER_ONLY = 0o600;
const DEFAULT_CACHE_MIB = 8;
// about the most SQLite maps in the driver's build
const DEFAULT_MMAP_MIB = 2047;
// each page of the table leaves what is too small for one more record: a bigger page leaves it half as often
const PAGE_BYTES = 8192;
export const MMAP_ENV = 'UID2_BATCH_STATE_MMAP_MIB';

/**
 * What reads a state file whole (`state info`, `export`): a damaged value throws StateDamagedError, except in
 * `entries()`, which skips a damaged entry (counted by `damaged()`) so that an export saves what is readable.
 */
export type StateReader = Pick<
  StateStore,
  'path' | 'meta' | 'getMeta' | 'entries' | 'damaged' | 'tally' | 'pendingChangeCounts' | 'lastRun' | 'close'
>;

/**
 * Opens (or creates, owner-only) a state file of this version's schema and of this environment. Throws a
 * StateError subclass for anything else; StateDamagedError for a checksum failure, here or in any later call.
 */
export function openState(path: string, options: OpenStateOptions): StateStore {
  return open(path, options, false);
}

/** A state file read as it is, of any environment: checked to be ours, then read through a read-only store. */
export function openStateReader(path: string): StateReader {
  return open(path, { envFingerprint: '', readonly: true, create: false }, true);
}

/** What an open says of a file it cannot use: a run's words name --state, a reader's only the file. */
function wordsOf(path: string, reading: boolean) {
  if (reading) {
    const notOurs = `'${path}' is not a uid2-batch state file (not SQLite, damaged, or another program's database)`;
    const cannotOpen = `cannot open '${path}' as a state file: check its permissions and those of its directory`;
    return {
      missing: `state file '${path}' does not exist`,
      notFile: `state file '${path}' is not a regular file`,
      cannotOpen: new StateAccessError(cannotOpen, path),
      notOurs,
      notSqlite: notOurs,
      // a reader has nothing else to say of the file
      anySqliteNotOurs: true,
    };
  }
  const newName = 'give --state a new file name (it will be created)';
  return {
    missing: `state file ${path} does not exist; create it with \`uid2-batch map --state ${path}\` first, or check the path`,
    notFile: `state file ${path} is not a regular file; give a file path to --state`,
    cannotOpen: new StateError(
      `cannot open state file ${path}: check its permissions and those of its directory`,
      path,
    ),
    notOurs: `state file ${path} is a SQLite database but not a uid2-batch state; ${newName}`,
    notSqlite: `state file ${path} is not a uid2-batch state (not a SQLite database, or damaged); ${newName}`,
    anySqliteNotOurs: false,
  };
}

type Words = ReturnType<typeof wordsOf>;

function open(path: string, options: OpenStateOptions, reading: boolean): StateStore {
  const words = wordsOf(path, reading);
  const readonly = options.readonly ?? false;
  const create = (options.create ?? true) && !readonly;
  // a reader takes a file it cannot stat as missing
  const existing = statOrNull(path, reading);
  // a missing driver is an installation problem, to be reported before any file is created
  const Driver = sqliteDriver();
  const mmapMiB = reading ? 0 : (options.mmapMiB ?? mmapFromEnvironment(path));
  if (existing === null) {
    if (!create) throw new StateNotFoundError(path, words.missing);
    createOwnerOnly(path);
  } else if (!existing.isFile()) {
    throw new StateFormatError(words.notFile, path);
  }

  let db: Connection;
  try {
    db = new Driver(path, { readonly, fileMustExist: true, timeout: options.busyTimeoutMs ?? 5_000 });
  } catch (err) {
    throw asStateError(err, path, readonly, words);
  }
  try {
    if (reading) {
      checkOurs(db, tableNames(db), path, words);
      checkSchema(db, path);
      return damageReported(new StateStore(db, path, true), path);
    }
    db.pragma(`cache_size = ${-Math.round((options.cacheSizeMiB ?? DEFAULT_CACHE_MIB) * 1024)}`);
    db.pragma(`mmap_size = ${Math.max(0, Math.round(mmapMiB * 1024 * 1024))}`);
    // IN (...) lists and GROUP BY sort in temporary b-trees: keep them off the disk
    db.pragma('temp_store = MEMORY');
    const tables = tableNames(db);
    if (tables.size === 0) {
      if (!create) {
        throw new StateFormatError(
          `state file ${path} is empty, not a uid2-batch state; map with --state ${path} to fill it`,
          path,
        );
      }
      try {
        // an empty file (ours from a moment ago, or left by a run killed right after creating it) has nothing to lose
        chmodSync(path, OWNER_ONLY);
      } catch {
        // not our file to chmod: SQLite still works; the owner chose its mode
      }
      // before the switch to WAL, after which a file's page size is fixed
      db.pragma(`page_size = ${PAGE_BYTES}`);
      enableWal(db);
      initialize(db, path, options, words);
    } else {
      checkOurs(db, tables, path, words);
      checkSchema(db, path);
      if (!readonly) enableWal(db);
    }
    checkEnvironment(db, path, options.envFingerprint);
    tightenSiblings(path);
    return damageReported(new StateStore(db, path, readonly, options.tailEntries, options.keyCacheMiB), path);
  } catch (err) {
    db.close();
    throw asStateError(err, path, readonly, words);
  }
}

function mmapFromEnvironment(path: string): number {
  const text = (process.env[MMAP_ENV] ?? '').trim();
  if (text === '') return DEFAULT_MMAP_MIB;
  if (!/^\d{1,7}$/.test(text)) {
    throw new StateSettingError(
      `${MMAP_ENV} must be a whole number of MiB of the state file to map into memory (0 maps none), not "${text}"`,
      path,
    );
  }
  return Number(text);
}

function statOrNull(path: string, anyError = false): Stats | null {
  try {
    return statSync(path);
  } catch (err) {
    if (anyError || errnoOf(err) === 'ENOENT') return null;
    throw err;
  }
}

/** Created empty with 0600 before SQLite writes a byte, whatever the umask; a file that appeared meanwhile is kept. */
function createOwnerOnly(path: string): void {
  let fd: number;
  try {
    fd = openSync(path, 'wx', OWNER_ONLY);
  } catch (err) {
    if (errnoOf(err) === 'EEXIST') return;
    if (errnoOf(err) === 'ENOENT') {
      throw new StateError(`cannot create state file ${path}: its directory does not exist`, path);
    }
    throw err;
  }
  try {
    fchmodSync(fd, OWNER_ONLY);
  } finally {
    closeSync(fd);
  }
}

/** The file and its -wal and -shm siblings, in bytes (0 for one that is not there). */
export function stateFileSizes(path: string): { file: number; wal: number; shm: number } {
  const size = (p: string): number => statOrNull(p, true)?.size ?? 0;
  return { file: size(path), wal: size(`${path}-wal`), shm: size(`${path}-shm`) };
}

/** Raw UIDs pass through the WAL: a -wal or -shm left looser than the file is made as private. */
function tightenSiblings(path: string): void {
  const main = statOrNull(path);
  if (main === null || (main.mode & 0o077) !== 0) return;
  for (const suffix of ['-wal', '-shm']) {
    const sibling = statOrNull(path + suffix);
    if (sibling !== null && (sibling.mode & 0o077) !== 0) {
      try {
        chmodSync(path + suffix, sibling.mode & 0o700);
      } catch {
        // owned by another user: nothing this process can do
      }
    }
  }
}

function enableWal(db: Connection): void {
  db.pragma('journal_mode = WAL');
  // a commit writes the WAL without fsync, a checkpoint syncs: a killed process loses nothing
  db.pragma('synchronous = NORMAL');
  // checkpoints every 64 MB, so that pages dirtied by several commits are written once; the WAL shrinks back to it
  db.pragma('wal_autocheckpoint = 16384');
  db.pragma('journal_size_limit = 67108864');
}

function tableNames(db: Connection): Set<string> {
  return new Set(db.prepare("SELECT name FROM sqlite_schema WHERE type = 'table'").pluck().all() as string[]);
}

function checkOurs(db: Connection, tables: Set<string>, path: string, words: Words): void {
  const app =
    tables.has('meta') && db.prepare('SELECT value FROM meta WHERE key = ?').pluck().get(META_KEYS.application);
  if (app !== APPLICATION_ID) throw new StateFormatError(words.notOurs, path);
}

/** A file of another build is refused with one line: an earlier one's with how to rebuild it. */
function checkSchema(db: Connection, path: string): void {
  const hasSums = (db.prepare('PRAGMA table_info(meta)').all() as { name: string }[]).some((c) => c.name === 'sum');
  const stored: unknown = db.prepare('SELECT value FROM meta WHERE key = ?').pluck().get(META_KEYS.schemaVersion);
  const version = Number(hasSums ? metaValue(db, META_KEYS.schemaVersion) : stored);
  if (!hasSums || version < SCHEMA_VERSION) {
    throw new StateFormatError(
      `state file ${path} was written by an earlier build of uid2-batch (schema ${String(stored ?? 'unknown')}), ` +
        `whose format this version does not read; rebuild it: map your input again with --state and a new file ` +
        `(to keep what it holds, run \`uid2-batch state export ${path}\` with the build that wrote it first)`,
      path,
    );
  }
  if (!Number.isInteger(version)) {
    throw new StateFormatError(
      `state file ${path} has no valid schema version; it is damaged or not a uid2-batch state`,
      path,
    );
  }
  if (version > SCHEMA_VERSION) {
    throw new StateFormatError(
      `state file ${path} was written by a newer uid2-batch (schema ${version}; this version reads schema ${SCHEMA_VERSION}); upgrade uid2-batch`,
      path,
    );
  }
}

/** The store with every call's checksum failure reported as the file's damage (the readers do not know the path). */
function damageReported(store: StateStore, path: string): StateStore {
  return new Proxy(store, {
    get(target, name, receiver) {
      const value: unknown = Reflect.get(target, name, receiver);
      if (typeof value !== 'function') return value;
      // waitForLock, the one promise, reads nothing of the file
      return function (this: unknown, ...args: unknown[]): unknown {
        try {
          return Reflect.apply(value, target, args);
        } catch (err) {
          throw asDamage(err, path);
        }
      };
    },
  });
}

function asDamage(err: unknown, path: string): unknown {
  if (err instanceof ChecksumError) return new StateDamagedError(path, err.what);
  if (err instanceof RecordFormatError) return new StateDamagedError(path, 'an entry record');
  return err;
}

/** Schema and identity in one transaction. */
function initialize(db: Connection, path: string, options: OpenStateOptions, words: Words): void {
  db.transaction(() => {
    // another process may have initialized it while this one waited for the write lock
    if (tableNames(db).size > 0) {
      checkOurs(db, tableNames(db), path, words);
      return;
    }
    db.exec(SCHEMA);
    const put = (key: string, value: string): void => setMetaValue(db, key, value);
    put(META_KEYS.keysUpto, '0');
    put(META_KEYS.keysMainUpto, '0');
    put(META_KEYS.application, APPLICATION_ID);
    put(META_KEYS.schemaVersion, String(SCHEMA_VERSION));
    put(META_KEYS.envFingerprint, options.envFingerprint);
    put(META_KEYS.api, options.api ?? 'v3');
    put(META_KEYS.createdAt, options.createdAt ?? new Date().toISOString());
  }).immediate();
}

function checkEnvironment(db: Connection, path: string, requested: string): void {
  const stored = metaValue(db, META_KEYS.envFingerprint);
  if (typeof stored !== 'string') {
    throw new StateFormatError(
      `state file ${path} records no environment; it is damaged or not a uid2-batch state`,
      path,
    );
  }
  if (stored !== requested) throw new StateEnvMismatchError(path, stored, requested);
}

/** SQLite's errors in the state's words: what is wrong and what to do. */
function asStateError(err: unknown, path: string, readonly: boolean, words: Words): unknown {
  if (err instanceof StateError) return err;
  const code = errnoOf(err) ?? '';
  if (code === 'SQLITE_NOTADB' || code === 'SQLITE_CORRUPT') return new StateFormatError(words.notSqlite, path);
  if (code === 'SQLITE_READONLY_ROLLBACK') return new StateJournalError(path);
  if (/^SQLITE_(CANTOPEN|READONLY|PERM)/.test(code)) {
    return stateAccessError(path, undefined, { writesFile: !readonly }) ?? words.cannotOpen;
  }
  if (words.anySqliteNotOurs && code.startsWith('SQLITE_')) return new StateFormatError(words.notOurs, path);
  if (code === 'SQLITE_BUSY') {
    return new StateError(
      `state file ${path} is busy: another process holds a write on it; try again when it has finished`,
      path,
    );
  }
  return asDamage(err, path);
}
