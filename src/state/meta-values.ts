/** The meta table's values read and written on a connection, for the modules that keep their marks there. */
import type { Database } from 'better-sqlite3';
import { SQL } from './queries.js';

export function metaValue(db: Database, key: string): string | undefined {
  return db.prepare(SQL.metaGet).pluck().get(key) as string | undefined;
}

/** A value as a number, or undefined when it is missing or not a finite number. */
export function metaNumber(db: Database, key: string): number | undefined {
  const value = metaValue(db, key);
  if (value === undefined) return undefined;
  const n = Number(value);
  return Number.isFinite(n) ? n : undefined;
}

export function setMetaValue(db: Database, key: string, value: string | number): void {
  db.prepare(SQL.metaSet).run(key, String(value));
}
