import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { describeError } from '../../src/cli/main.js';
import {
  DRIVER_PACKAGE,
  driverPackageFor,
  loadSqliteDriver,
  NODE20_DRIVER_PACKAGE,
  SqliteDriverError,
  sqliteDriver,
} from '../../src/state/sqlite-driver.js';

const realRequire = createRequire(import.meta.url);
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** A require that records what it was asked for and answers from `modules` (a missing name throws as Node does). */
function fakeRequire(modules: Record<string, unknown>) {
  const asked: string[] = [];
  const require = (id: string): unknown => {
    asked.push(id);
    if (id in modules) return modules[id];
    throw Object.assign(new Error(`Cannot find module '${id}'`), { code: 'MODULE_NOT_FOUND' });
  };
  return { asked, require };
}

/** A driver whose constructor fails as a binary built for another Node does. */
class WrongAbiDriver {
  constructor() {
    throw Object.assign(new Error('was compiled against a different Node.js version using NODE_MODULE_VERSION 115'), {
      code: 'ERR_DLOPEN_FAILED',
    });
  }
}

class WorkingDriver {
  closed = false;
  close(): void {
    this.closed = true;
  }
}

describe('driverPackageFor', () => {
  it('gives Node 20 the 12.x alias and Node 22 and later better-sqlite3 13', () => {
    expect(driverPackageFor('20.18.0')).toBe(NODE20_DRIVER_PACKAGE);
    expect(driverPackageFor('v20.20.2')).toBe(NODE20_DRIVER_PACKAGE);
    expect(driverPackageFor('21.7.3')).toBe(NODE20_DRIVER_PACKAGE);
    expect(driverPackageFor('22.0.0')).toBe(DRIVER_PACKAGE);
    expect(driverPackageFor('v22.23.3')).toBe(DRIVER_PACKAGE);
    expect(driverPackageFor('24.19.0')).toBe(DRIVER_PACKAGE);
    expect(driverPackageFor('26.1.0')).toBe(DRIVER_PACKAGE);
  });

  it('names two different packages, both installed by package.json', () => {
    expect(NODE20_DRIVER_PACKAGE).not.toBe(DRIVER_PACKAGE);
    const pkg = realRequire('../../package.json') as {
      dependencies: Record<string, string>;
      optionalDependencies: Record<string, string>;
    };
    expect(pkg.dependencies[DRIVER_PACKAGE]).toMatch(/^13\./);
    expect(pkg.optionalDependencies[NODE20_DRIVER_PACKAGE]).toMatch(/^npm:better-sqlite3@12\./);
  });
});

describe('loadSqliteDriver', () => {
  it('requires only the package for the Node version it is given, and opens one in-memory database', () => {
    for (const [nodeVersion, wanted] of [
      ['20.19.0', NODE20_DRIVER_PACKAGE],
      ['24.19.0', DRIVER_PACKAGE],
    ] as const) {
      const { asked, require } = fakeRequire({ [wanted]: WorkingDriver });
      expect(loadSqliteDriver({ nodeVersion, require })).toBe(WorkingDriver);
      expect(asked).toEqual([wanted]);
    }
  });

  it('on Node 20 without the optional build: says to install build tools or use Node 22, exit 2', () => {
    // better-sqlite3 13 is installed but must not be used on Node 20 (it crashes the process there)
    const { asked, require } = fakeRequire({ [DRIVER_PACKAGE]: WorkingDriver });
    let caught: unknown;
    try {
      loadSqliteDriver({ nodeVersion: '20.18.1', require });
    } catch (err) {
      caught = err;
    }
    expect(asked).toEqual([NODE20_DRIVER_PACKAGE]);
    expect(caught).toBeInstanceOf(SqliteDriverError);
    const message = (caught as Error).message;
    expect(message).toContain(NODE20_DRIVER_PACKAGE);
    expect(message).toContain('Node 20.18.1');
    expect(message).toMatch(/C\+\+ compiler/);
    expect(message).toContain('Node 22 or later');
    expect(describeError(caught)).toEqual({ line: message, exitCode: 2 });
  });

  it('on Node 24 without better-sqlite3: says to install again', () => {
    const { require } = fakeRequire({ [NODE20_DRIVER_PACKAGE]: WorkingDriver });
    expect(() => loadSqliteDriver({ nodeVersion: '24.19.0', require })).toThrow(
      /SQLite driver better-sqlite3 is not installed on Node 24\.19\.0; run `npm install` again/,
    );
  });

  it('a binary built for another Node: says which package to rebuild, exit 2', () => {
    const { require } = fakeRequire({ [NODE20_DRIVER_PACKAGE]: WrongAbiDriver });
    let caught: unknown;
    try {
      loadSqliteDriver({ nodeVersion: '20.19.0', require });
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(SqliteDriverError);
    expect((caught as Error).message).toContain(`npm rebuild ${NODE20_DRIVER_PACKAGE}`);
    expect(describeError(caught).exitCode).toBe(2);
  });
});

describe('sqliteDriver on this Node', () => {
  it('loads the package for this Node once, and it runs SQL', () => {
    const Driver = sqliteDriver();
    expect(sqliteDriver()).toBe(Driver);
    expect(Driver).toBe(realRequire(driverPackageFor(process.versions.node)));
    const db = new Driver(':memory:');
    try {
      expect(db.prepare('SELECT 6 * 7 AS answer').get()).toEqual({ answer: 42 });
    } finally {
      db.close();
    }
  });
});

describe('the driver for this Node under load', () => {
  it('survives many prepared statements being collected (better-sqlite3 12 aborts so on Node 24)', () => {
    // in a child: the failure this guards against is an abort of the whole process, not an exception
    const script = `
      const Driver = require(process.argv[1]);
      const db = new Driver(':memory:');
      let sum = 0;
      for (let i = 0; i < 200000; i++) sum += db.prepare('SELECT ' + (i % 100) + ' AS n').get().n;
      db.close();
      process.stdout.write(String(sum));`;
    const child = spawnSync(process.execPath, ['-e', script, driverPackageFor(process.versions.node)], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    expect({ status: child.status, signal: child.signal, stderr: child.stderr.slice(0, 500) }).toEqual({
      status: 0,
      signal: null,
      stderr: '',
    });
    expect(child.stdout).toBe(String(2000 * 4950));
  });
});
