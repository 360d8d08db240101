// The folder layout the tree keeps: tables in and out in pipeline/io by format, identifier detection beside the
// map job, one state format in a state engine of bounded size, one Parquet reader and one writer, a CLI that
// reaches the state and the service only through the pipeline.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { importGraph, SRC, sourceFiles } from './import-graph.js';

const ROOT = join(SRC, '..');
/**
 * A ceiling that only comes down: each mechanism left in the SQLite engine pays for itself on `npm run bench:state`.
 * The engine is src/state but for the interface every state kind shares, the file's side of it, and the database.
 */
const STATE_MAX_LINES = 3_499;
const NOT_ENGINE = /^state\/(backend|open-backend|file-backend)\.ts$|^state\/postgres\//;
/**
 * The PostgreSQL store (src/state/postgres), counted apart: the server does its indexing, so it is a client of
 * SQL, not an engine. Its ceiling comes down, or goes up only for a change that meets a target of the state bench
 * (as the lookup reader of lookup-lines.ts did, for the rate of lookups of stored keys).
 */
const POSTGRES_STATE_MAX_LINES = 2_038;
const inPostgresStore = (file: string): boolean => file.startsWith('state/postgres/');
/** The reader (hyparquet) and the writer (parquet-wasm); the Arrow stream the writer reads is our own. */
const PARQUET_LIBRARIES_MAX = 2;
/** A package whose job is Parquet or Arrow: readers, writers, their codecs, and the engines that read Parquet. */
const PARQUET_LIBRARY = /parquet|arrow|duckdb/i;

const isFolder = (path: string): boolean => existsSync(path) && statSync(path).isDirectory();
const filesIn = (folder: string): string[] => sourceFiles().filter((f) => f.startsWith(`${folder}/`));
const textOf = (file: string): string => readFileSync(join(SRC, file), 'utf8');
/** Files of src/ that import a package matching `pkg` (or a path inside it), statically or with import(). */
const importersOf = (pkg: RegExp): string[] =>
  sourceFiles().filter((f) =>
    [...textOf(f).matchAll(/(?:\bfrom\s*|\bimport\s*\(?\s*)(['"])([^'".][^'"]*)\1/g)].some(
      (m) => !m[2].startsWith('node:') && pkg.test(m[2]),
    ),
  );

describe('pipeline/io: one folder per format, and the outputs', () => {
  it.each(['csv', 'jsonl', 'parquet', 'output'])('src/pipeline/io/%s exists and holds code', (format) => {
    expect(isFolder(join(SRC, 'pipeline', 'io', format))).toBe(true);
    expect(filesIn(`pipeline/io/${format}`)).not.toEqual([]);
  });

  it('src/pipeline/table is gone', () => {
    expect(existsSync(join(SRC, 'pipeline', 'table'))).toBe(false);
  });

  it('the CSV reader lives in io/csv: no other pipeline file imports csv-parse', () => {
    const outside = importersOf(/^csv-parse(\/|$)/).filter(
      (f) => f.startsWith('pipeline/') && !f.startsWith('pipeline/io/csv/'),
    );
    expect(outside).toEqual([]);
  });

  it('the JSON Lines reader lives in io/jsonl: no other io file parses JSON', () => {
    const outside = filesIn('pipeline/io').filter(
      (f) => !f.startsWith('pipeline/io/jsonl/') && /\bJSON\.parse\b/.test(textOf(f)),
    );
    expect(outside).toEqual([]);
  });

  it('the Parquet reader and writer live in io/parquet: no other file imports a Parquet library', () => {
    const outside = importersOf(PARQUET_LIBRARY).filter((f) => !f.startsWith('pipeline/io/parquet/'));
    expect(outside).toEqual([]);
  });

  it('Parquet libraries are reached through their public entry points only', () => {
    const privatePaths = importersOf(/^(@[\w.-]+\/)?[\w.-]*(parquet|arrow)[\w.-]*\/(src|lib|dist)\//i);
    expect(privatePaths).toEqual([]);
  });

  it('the sinks and the row encoders live in io/output', () => {
    const names = filesIn('pipeline/io/output').map((f) => f.split('/').pop() as string);
    expect(names.some((n) => /sink/.test(n))).toBe(true);
    expect(names.some((n) => /encoder/.test(n))).toBe(true);
  });
});

describe('identifier detection', () => {
  it('lives beside the map job, in src/pipeline/map/identifier-columns.ts, and nowhere else', () => {
    expect(existsSync(join(SRC, 'pipeline', 'map', 'identifier-columns.ts'))).toBe(true);
    expect(sourceFiles().filter((f) => /identifier-col/.test(f) && !f.startsWith('pipeline/map/'))).toEqual([]);
  });
});

describe('the state engine', () => {
  it('keeps one format: no upgrade-v* files under src/state', () => {
    expect(filesIn('state').filter((f) => /(^|\/)upgrade-v/.test(f))).toEqual([]);
  });

  it(`is at most ${STATE_MAX_LINES.toLocaleString('en-US')} lines (src/state's SQLite engine)`, () => {
    const lines = filesIn('state')
      .filter((f) => !NOT_ENGINE.test(f))
      .reduce((n, f) => n + textOf(f).split('\n').length - 1, 0);
    expect(lines).toBeLessThanOrEqual(STATE_MAX_LINES);
  });

  it(`keeps the PostgreSQL store at most ${POSTGRES_STATE_MAX_LINES.toLocaleString('en-US')} lines (src/state/postgres)`, () => {
    const lines = filesIn('state')
      .filter(inPostgresStore)
      .reduce((n, f) => n + textOf(f).split('\n').length - 1, 0);
    expect(lines).toBeLessThanOrEqual(POSTGRES_STATE_MAX_LINES);
  });
});

describe('dependencies', () => {
  it(`hold at most ${PARQUET_LIBRARIES_MAX} Parquet or Arrow libraries`, () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      dependencies?: Record<string, string>;
    };
    const parquet = Object.keys(pkg.dependencies ?? {}).filter((name) => PARQUET_LIBRARY.test(name));
    expect(parquet.length, parquet.join(', ')).toBeLessThanOrEqual(PARQUET_LIBRARIES_MAX);
  });

  it('hold every package src imports: a dev dependency is not installed with the package', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      dependencies?: Record<string, string>;
      optionalDependencies?: Record<string, string>;
    };
    const installed = new Set([...Object.keys(pkg.dependencies ?? {}), ...Object.keys(pkg.optionalDependencies ?? {})]);
    // import and export statements at the start of a line, and import() of a literal: not examples in comments
    const statements =
      /^\s*(?:import|export)\b[^'"]*?\bfrom\s*(['"])([^'".][^'"]*)\1|\bimport\(\s*(['"])([^'".][^'"]*)\3\s*\)/gm;
    const imported = new Set<string>();
    for (const f of sourceFiles())
      for (const m of textOf(f).matchAll(statements)) {
        const spec = m[2] ?? m[4];
        if (!spec.startsWith('node:'))
          imported.add(
            spec
              .split('/')
              .slice(0, spec.startsWith('@') ? 2 : 1)
              .join('/'),
          );
      }
    expect(imported).toContain('parquet-wasm'); // the reader works: the Parquet writer's package is among them
    expect([...imported].filter((name) => !installed.has(name))).toEqual([]);
  });
});

describe('the CLI', () => {
  it('imports neither src/state nor src/client: the jobs in src/pipeline open the store and send', () => {
    const wrong = [...importGraph()]
      .filter(([file]) => file.startsWith('cli/'))
      .flatMap(([file, targets]) =>
        targets.filter((t) => t.startsWith('state/') || t.startsWith('client/')).map((t) => `${file} -> ${t}`),
      );
    expect(wrong).toEqual([]);
  });

  it('(the graph is read: cli/ has files that import the pipeline)', () => {
    const cli = [...importGraph()].filter(([file]) => file.startsWith('cli/'));
    expect(cli.length).toBeGreaterThan(10);
    expect(cli.some(([, targets]) => targets.some((t) => t.startsWith('pipeline/')))).toBe(true);
    expect(readdirSync(join(SRC, 'cli')).length).toBeGreaterThan(0);
  });
});

describe('packages loaded only where they are needed', () => {
  /** Files of src/ that load `pkg` at import time: a static import that is not `import type`, or import(). */
  const valueImportersOf = (pkg: RegExp): string[] =>
    sourceFiles().filter((f) =>
      [
        ...textOf(f).matchAll(
          /^import\s+(type\s+)?[^;]*?\bfrom\s*(['"])([^'"]+)\2|(?<!typeof\s+)\bimport\s*\(\s*(['"])([^'"]+)\4/gm,
        ),
      ].some(
        (m) => (m[3] !== undefined && m[1] === undefined && pkg.test(m[3])) || (m[5] !== undefined && pkg.test(m[5])),
      ),
    );
  /** Files of src/ that require() `pkg` or a path inside it. */
  const requirersOf = (pkg: RegExp): string[] =>
    sourceFiles().filter((f) => [...textOf(f).matchAll(/\brequire\(\s*(['"])([^'"]+)\1/g)].some((m) => pkg.test(m[2])));

  it.each([
    // the package's index also loads fetch, WebSocket, the mocks and the caches, on every command that sends
    ['undici', 'client/undici-parts.ts', /^undici(\/|$)/],
    // the phone metadata, loaded on the first national number rather than on every start
    ['libphonenumber-js', 'identity/phone-library.ts', /^libphonenumber-js(\/|$)/],
  ])('%s: no file imports it; only %s loads it', (_name, loader, pkg) => {
    expect(valueImportersOf(pkg)).toEqual([]);
    expect(requirersOf(pkg)).toEqual([loader]);
  });
});
