/** The steps that bring an older state file to the current schema, in order. */
import type { Database } from 'better-sqlite3';
import { SCHEMA_V2_JOURNAL } from './legacy-schema.js';
import { upgradeToV3Step } from './upgrade-v3.js';
import { upgradeToV4Step } from './upgrade-v4.js';
import { upgradeToV5Step } from './upgrade-v5.js';
import { upgradeToV6Step } from './upgrade-v6.js';

export interface Migration {
  /** The schema version the file has after this step. */
  version: number;
  /** The whole step, in one transaction. */
  up?: (db: Database) => void;
  /**
   * A step done in pieces, each in its own transaction: called until it returns true, so a run killed in the
   * middle leaves a file the next writing run carries on from.
   */
  piece?: (db: Database) => boolean;
  /**
   * True when the step only adds what a read never needs (a table written by runs): a read-only open (a dry run)
   * of a file without it goes ahead instead of asking for a writing run first.
   */
  readsWithout?: boolean;
}

/** Every step from an older file to the current schema, in order. A new file is made at the current one. */
export const MIGRATIONS: readonly Migration[] = [
  { version: 2, up: (db) => db.exec(SCHEMA_V2_JOURNAL), readsWithout: true },
  { version: 3, piece: (db) => upgradeToV3Step(db) },
  { version: 4, piece: (db) => upgradeToV4Step(db) },
  { version: 5, piece: (db) => upgradeToV5Step(db) },
  { version: 6, piece: (db) => upgradeToV6Step(db) },
];
