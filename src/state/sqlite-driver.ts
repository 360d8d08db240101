// Loads the SQLite driver built for the running Node, once and only when a state file is first opened.
import { createRequire } from 'node:module';
import type BetterSqlite3 from 'better-sqlite3';

/** The driver's Database constructor; both lines have the same API (the types come from @types/better-sqlite3). */
export type SqliteDriver = typeof BetterSqlite3;

/**
 * better-sqlite3 13 ships prebuilt binaries and runs on Node 22 and later, but crashes on Node 20; the 12.x line,
 * installed under this alias as an optional dependency and built from source at install, is the one that runs on
 * Node 20 (and crashes on Node 24). docs/state-file.md says more.
 */
export const DRIVER_PACKAGE = 'better-sqlite3';
export const NODE20_DRIVER_PACKAGE = 'better-sqlite3-node20';

/** The first Node major version that better-sqlite3 13 supports. */
const FIRST_MAJOR_OF_CURRENT_DRIVER = 22;

/** The driver could not be loaded: the installation is incomplete. Exit 2, with what to do. */
export class SqliteDriverError extends Error {
  /** Read by the CLI's error report: this message is meant for the user as it is. */
  readonly userMessage: string;
  readonly exitCode = 2;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'SqliteDriverError';
    this.userMessage = message;
  }
}

/** Which driver package serves a Node version (`20.18.0` or `v24.19.0`). */
export function driverPackageFor(nodeVersion: string): string {
  const major = Number.parseInt(nodeVersion.replace(/^v/, ''), 10);
  return Number.isInteger(major) && major < FIRST_MAJOR_OF_CURRENT_DRIVER ? NODE20_DRIVER_PACKAGE : DRIVER_PACKAGE;
}

/** What loadSqliteDriver needs from its surroundings; tests give their own. */
export interface DriverLoadContext {
  nodeVersion: string;
  require: (id: string) => unknown;
}

const defaultContext = (): DriverLoadContext => ({
  nodeVersion: process.versions.node,
  require: createRequire(import.meta.url),
});

/**
 * Requires the driver for `context.nodeVersion` and opens one in-memory database with it, so that a binary built
 * for another Node, or none at all, is reported here in one clear line instead of on the first state file.
 */
export function loadSqliteDriver(context: DriverLoadContext = defaultContext()): SqliteDriver {
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

/** The driver for this process's Node, loaded on the first call. */
export function sqliteDriver(): SqliteDriver {
  loaded ??= loadSqliteDriver();
  return loaded;
}
