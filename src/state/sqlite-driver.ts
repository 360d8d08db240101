// Loads the SQLite driver built for the running Node, once and only when a state file is first opened.
import { createRequire } from 'node:module';
import type BetterSqlite3 from 'better-sqlite3';

export type SqliteDriver = typeof BetterSqlite3;

/**
 * better-sqlite3 13 runs on Node 22 and later but crashes on Node 20; the 12.x line, an optional dependency under
 * this alias built at install, runs on Node 20 (docs/state-file.md).
 */
export const DRIVER_PACKAGE = 'better-sqlite3';
export const NODE20_DRIVER_PACKAGE = 'better-sqlite3-node20';
const FIRST_MAJOR_OF_CURRENT_DRIVER = 22;

/** The driver could not be loaded: the installation is incomplete (exit 2). */
export class SqliteDriverError extends Error {
  override readonly name = 'SqliteDriverError';
  readonly userMessage = this.message;
  readonly exitCode = 2;
}

export function driverPackageFor(nodeVersion: string): string {
  const major = Number.parseInt(nodeVersion.replace(/^v/, ''), 10);
  return Number.isInteger(major) && major < FIRST_MAJOR_OF_CURRENT_DRIVER ? NODE20_DRIVER_PACKAGE : DRIVER_PACKAGE;
}

/** Requires the driver and opens an in-memory database, so that a binary built for another Node is reported here. */
export function loadSqliteDriver(
  context: { nodeVersion: string; require: (id: string) => unknown } = {
    nodeVersion: process.versions.node,
    require: createRequire(import.meta.url),
  },
): SqliteDriver {
  const name = driverPackageFor(context.nodeVersion);
  const node = `Node ${context.nodeVersion.replace(/^v/, '')}`;
  let driver: SqliteDriver;
  try {
    driver = context.require(name) as SqliteDriver;
  } catch (err) {
    throw new SqliteDriverError(notInstalledMessage(name, node), { cause: err });
  }
  try {
    new driver(':memory:').close();
  } catch (err) {
    throw new SqliteDriverError(
      `the SQLite driver ${name} is installed but does not load on ${node} (it was built for another Node version, ` +
        `or its build is incomplete); run \`npm rebuild ${name}\` with this Node, or \`npm ci\` again`,
      { cause: err },
    );
  }
  return driver;
}

function notInstalledMessage(name: string, node: string): string {
  if (name === NODE20_DRIVER_PACKAGE) {
    return (
      `the SQLite driver for Node 20 (${name}, an optional dependency built from source at install) is not ` +
      `installed on ${node}: its build failed or was skipped; install a C++ compiler, make and Python 3 and run ` +
      '`npm install` again, or use Node 22 or later (its driver needs no build)'
    );
  }
  return `the SQLite driver ${name} is not installed on ${node}; run \`npm install\` again`;
}

let loaded: SqliteDriver | undefined;

export function sqliteDriver(): SqliteDriver {
  loaded ??= loadSqliteDriver();
  return loaded;
}
