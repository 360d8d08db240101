// Builds state files the way uid2-batch wrote schemas 1 and 2 (text keys, upserts), to test their upgrade.
import type BetterSqlite3 from 'better-sqlite3';
import Database from '../helpers/sqlite-driver.js';
import { LEGACY_UPSERT, SCHEMA_V1, SCHEMA_V2_JOURNAL } from '../../src/state/legacy-schema.js';
import type { EntryUpdate } from '../../src/state/index.js';

export interface LegacyWriter {
  commit(updates: readonly EntryUpdate[], nowS: number): void;
  /** A raw connection, for what old runs also wrote (checks, journal rows, runs). */
  db: BetterSqlite3.Database;
}

export function buildLegacyState(
  path: string,
  version: 1 | 2,
  env: string,
  fill: (w: LegacyWriter) => void,
  api: 'v2' | 'v3' = 'v3',
): void {
  const db = new Database(path);
  try {
    db.pragma('journal_mode = WAL');
    db.exec(SCHEMA_V1);
    if (version === 2) db.exec(SCHEMA_V2_JOURNAL);
    const put = db.prepare('INSERT INTO meta (key, value) VALUES (?, ?)');
    put.run('application', 'uid2-batch');
    put.run('schema_version', String(version));
    put.run('env_fingerprint', env);
    put.run('api', api);
    put.run('created_at', '2026-01-01T00:00:00.000Z');
    const mapped = db.prepare(LEGACY_UPSERT.mapped);
    const optout = db.prepare(LEGACY_UPSERT.optout);
    const invalid = db.prepare(LEGACY_UPSERT.invalid);
    const typeCode = { email: 0, phone: 1 } as const;
    const commit = db.transaction((updates: readonly EntryUpdate[], nowS: number) => {
      for (const { type, hash, outcome: o } of updates) {
        const t = typeCode[type];
        if (o.kind === 'mapped') mapped.run(t, hash, o.u, o.p, o.r, o.bucketId ?? null, nowS, nowS);
        else if (o.kind === 'optout') optout.run(t, hash, o.optedOutSinceMs ?? null);
        else invalid.run(t, hash);
      }
    });
    fill({ commit: (updates, nowS) => commit.immediate(updates, nowS), db });
  } finally {
    db.close();
  }
}
