/** The meta table's values read and written on a connection, each with its checksum (checksum.ts). */
import type { Database } from 'better-sqlite3';
import { ChecksumError, checksumOf } from './checksum.js';
import { prepared, SQL } from './queries.js';

/** A value's checksum covers its key too, so that a value under another key does not read as that key's. */
export function metaSumOf(key: string, value: string): number {
  return checksumOf(`${key}\u0000${value}`);
}

/** The value of a (value, sum) row read for `key`; undefined for no row. */
export function checkedMetaValue(key: string, row: unknown): string | undefined {
  if (row === undefined) return undefined;
  const [value, sum] = row as [unknown, unknown];
  if (typeof value !== 'string' || sum !== metaSumOf(key, value)) throw new ChecksumError(`meta value '${key}'`);
  return value;
}

export function metaValue(db: Database, key: string): string | undefined {
  return checkedMetaValue(key, prepared(db, SQL.metaGet).raw().get(key));
}

export function metaNumber(db: Database, key: string): number | undefined {
  const value = metaValue(db, key);
  if (value === undefined) return undefined;
  const n = Number(value);
  return Number.isFinite(n) ? n : undefined;
}

export function setMetaValue(db: Database, key: string, value: string | number): void {
  const text = String(value);
  prepared(db, SQL.metaSet).run(key, text, metaSumOf(key, text));
}
