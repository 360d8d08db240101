import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHash } from 'node:crypto';
import { openState, type OpenStateOptions, type StateStore } from '../../src/state/index.js';
import { type KeyLevel, levelPairs } from '../../src/state/key-levels.js';
import { withChecksum } from '../../src/state/checksum.js';
import { setMetaValue } from '../../src/state/meta-values.js';
import Database from '../helpers/sqlite-driver.js';

type BetterDatabase = InstanceType<typeof Database>;

export const ENV = 'uid2:integ';

/** A temporary directory per test file; `cleanup` removes it and closes every store opened through it. */
export function tmpStates(prefix = 'uid2-state-') {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const open: StateStore[] = [];
  let n = 0;
  return {
    dir,
    file(name = `s${++n}.db`): string {
      return join(dir, name);
    },
    open(path: string, options: Partial<OpenStateOptions> = {}): StateStore {
      const store = openState(path, { envFingerprint: ENV, ...options });
      open.push(store);
      return store;
    },
    cleanup(): void {
      for (const s of open) s.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A deterministic base64 SHA-256, the shape of every stored hash and raw UID. */
export function b64(label: string): string {
  return createHash('sha256').update(label).digest('base64');
}

/** The (key, id) pairs a level of the lookup index holds in a state file (schema 5), in key order. */
export function levelPairsOf(path: string, level: KeyLevel = 'key_blocks'): [number, number][] {
  const db = new Database(path, { readonly: true });
  try {
    const pairs: [number, number][] = [];
    for (const stream = levelPairs(db, level); stream.key < Number.POSITIVE_INFINITY; stream.next()) {
      pairs.push([stream.key, stream.id]);
    }
    return pairs;
  } finally {
    db.close();
  }
}

/** Sets a meta value of a state file with its checksum, as the store writes it (tests that stage a file's marks). */
export function setMetaAt(path: string, key: string, value: string | number): void {
  const db = new Database(path);
  try {
    setMetaValue(db, key, value);
  } finally {
    db.close();
  }
}

/**
 * Replaces every piece of `column` in `table` (the keys filter) by zeros with their checksum
 * (a piece consistent but wrong, to see that readers trust it), or without one (damage, which readers must not use).
 */
export function zeroPieces(db: BetterDatabase, table: string, column: string, checksummed: boolean): void {
  const rows = db.prepare(`SELECT rowid, length(${column}) FROM ${table}`).raw().all() as [number, number][];
  const update = db.prepare(`UPDATE ${table} SET ${column} = ? WHERE rowid = ?`);
  for (const [rowid, length] of rows) {
    const zeros = Buffer.alloc(length - 4);
    update.run(checksummed ? withChecksum(zeros) : Buffer.alloc(length), rowid);
  }
}

/** SQLite's integrity check of a state file: 'ok', or its findings joined by newlines. */
export function integrityOf(path: string): string {
  const db = new Database(path, { readonly: true });
  try {
    const lines = (db.pragma('integrity_check') as { integrity_check: string }[]).map((f) => f.integrity_check);
    return lines.join('\n');
  } finally {
    db.close();
  }
}

/** The runs table of a state file, newest first. */
export function runsOf(path: string) {
  const db = new Database(path, { readonly: true });
  try {
    const rows = db
      .prepare('SELECT id, command, args, started_at, now, finished_at, summary, exit_code FROM runs ORDER BY id DESC')
      .raw()
      .all() as [number, string, string, number, number, number | null, string | null, number | null][];
    return rows.map(([id, command, args, startedAtS, nowS, finishedAtS, summary, exitCode]) => ({
      id,
      command,
      args,
      startedAtS,
      nowS,
      finishedAtS,
      summary,
      exitCode,
    }));
  } finally {
    db.close();
  }
}

/** The entries of a state file after its key levels: its tail, which a store indexes in memory. */
export function tailOf(path: string): number {
  const db = new Database(path, { readonly: true });
  try {
    const last = (db.prepare('SELECT max(id) FROM entries').pluck().get() as number | null) ?? 0;
    const upto = Number(db.prepare("SELECT value FROM meta WHERE key = 'keys_upto'").pluck().get() ?? 0);
    return last - upto;
  } finally {
    db.close();
  }
}
