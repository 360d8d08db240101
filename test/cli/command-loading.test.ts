import { readFileSync } from 'node:fs';
import { join, posix } from 'node:path';
import { Command, CommanderError } from 'commander';
import { describe, expect, it } from 'vitest';
import { COMMANDS } from '../../src/cli/commands.js';
import { buildProgram, commandsFor } from '../../src/cli/main.js';
import { SRC } from '../architecture/import-graph.js';

const argvOf = (...args: string[]): string[] => ['node', 'uid2-batch', ...args];

describe('the command table', () => {
  it('lists every command under the name its module registers, in the order the root help shows', async () => {
    for (const entry of COMMANDS) {
      const program = new Command('probe');
      (await entry.load())(program);
      expect(
        program.commands.map((c) => c.name()),
        entry.name,
      ).toEqual([entry.name]);
    }
    const whole = await buildProgram();
    expect(whole.commands.map((c) => c.name())).toEqual(COMMANDS.map((c) => c.name));
    expect(new Set(COMMANDS.map((c) => c.name)).size).toBe(COMMANDS.length);
  });
});

describe('commandsFor: the commands an argument list needs, as commander dispatches it', () => {
  it.each<[string[], string[] | undefined]>([
    [['--version'], []],
    [['-V'], []],
    // the version is the root's option wherever it stands, as commander reads it
    [['map', 'x.csv', '--version'], []],
    [['map', 'x.csv'], ['map']],
    [['--no-color', 'map', 'x.csv'], ['map']],
    [['map', '--help'], ['map']],
    [['help', 'map'], ['map']],
    [['token', 'generate', '--email', '-'], ['token']],
    [['token', 'help', 'generate'], ['token']],
    [['serve', '--port', '0'], ['serve']],
    [['--', 'doctor'], ['doctor']],
    [['remap-due', '--state', 's.db'], ['remap-due']],
    [['--help'], undefined],
    [[], undefined],
    [['help'], undefined],
    [['help', 'nosuch'], undefined],
    [['mpa'], undefined],
    [['--bogus', 'map'], undefined],
  ])('%j -> %j', async (args, expected) => {
    expect(await commandsFor(argvOf(...args))).toEqual(expected);
  });
});

interface Outcome {
  out: string;
  err: string;
  code: string | undefined;
  exitCode: number | undefined;
  message: string | undefined;
}

/** What a program writes and how it ends for `args`, without running any command's work. */
async function outcome(commands: readonly string[] | undefined, args: string[]): Promise<Outcome> {
  let out = '';
  let err = '';
  const program = await buildProgram(commands, { writeOut: (s) => (out += s), writeErr: (s) => (err += s) });
  try {
    await program.parseAsync(argvOf(...args));
    return { out, err, code: undefined, exitCode: undefined, message: undefined };
  } catch (e) {
    const c = e instanceof CommanderError ? e : undefined;
    return { out, err, code: c?.code, exitCode: c?.exitCode, message: (e as Error).message };
  }
}

describe('a program holding only what commandsFor names behaves as the whole program', () => {
  it.each<[string[]]>([
    [['--version']],
    [['map', 'x.csv', '-V']],
    [['--help']],
    [[]],
    [['help']],
    [['help', 'map']],
    [['help', 'token']],
    [['help', 'nosuch']],
    [['map', '--help']],
    [['serve', '--help']],
    [['doctor', '--help']],
    [['token', '--help']],
    [['token', 'generate', '--help']],
    [['token', 'refresh', '--help']],
    [['token', 'help', 'validate']],
    [['token']],
    [['token', 'nosuch']],
    [['mpa']],
    [['--bogus', 'map']],
    [['serve', '--port', 'abc']],
    [['serve', 'extra']],
    [['doctor', '--roles', 'bad']],
    [['doctor', '--bogus']],
    [['token', 'validate', '--token']],
  ])('%j', async (args) => {
    const needed = await commandsFor(argvOf(...args));
    const whole = await outcome(undefined, args);
    // the comparison needs something to compare: every case writes or fails
    expect(whole.out + whole.err + (whole.message ?? '')).not.toBe('');
    expect(await outcome(needed, args)).toEqual(whole);
  });
});

// --- what the start loads ------------------------------------------------------------------------------------

/** Relative imports that stay at run time: `import type` and `export type` are erased, import() is not static. */
const STATIC_IMPORT = /^(?:import|export)\s+(?!type\s)[^;]*?\bfrom\s*(['"])([^'"]+)\1|^import\s*(['"])([^'"]+)\3/gm;

/** Every module `file` (relative to src/) loads before it runs, and the packages among them. */
function staticClosure(file: string): { files: Set<string>; packages: Set<string> } {
  const files = new Set<string>();
  const packages = new Set<string>();
  const visit = (f: string): void => {
    if (files.has(f)) return;
    files.add(f);
    for (const m of readFileSync(join(SRC, f), 'utf8').matchAll(STATIC_IMPORT)) {
      const spec = m[2] ?? m[4];
      if (spec.startsWith('.')) visit(posix.normalize(posix.join(posix.dirname(f), spec)).replace(/\.js$/, '.ts'));
      else if (!spec.startsWith('node:')) packages.add(spec);
    }
  };
  visit(file);
  return { files, packages };
}

const HEAVY_PACKAGES = [
  'undici',
  'better-sqlite3',
  'csv-parse',
  'csv-stringify',
  'ora',
  'p-limit',
  'libphonenumber-js',
  'hyparquet',
  'hyparquet-writer',
  'apache-arrow',
  'parquet-wasm',
];
const WORK_FOLDERS = /^(service|client|pipeline|state|identity)\//;
/**
 * Names and types of output formats that flags and help list, the exit codes every command ends with, and how a
 * line with figures reaches stderr (text or the JSON log): definitions, not work (they import nothing).
 */
const DEFINITIONS = new Set([
  'pipeline/io/format-names.ts',
  'pipeline/io/typed-cells.ts',
  'pipeline/io/output/hash-cells.ts',
  'pipeline/run/output-options.ts',
  'pipeline/run/exit-codes.ts',
  'pipeline/run/log-lines.ts',
]);
/**
 * What the entry itself sets up for every command (node built-ins only): the bound on the young generation, off but
 * for map, and the bench's CPU report, idle unless its variable is set.
 */
const ENTRY_SWITCHES = new Set(['pipeline/run/young-generation.ts', 'pipeline/workers/bench-report.ts']);

describe('what starting the CLI loads', () => {
  it('the entry loads commander and a few small modules, no command', () => {
    const { files, packages } = staticClosure('cli/main.ts');
    expect(files.size).toBeGreaterThan(2); // the reader works: main imports commands.ts at least
    expect(
      [...files].filter(
        (f) =>
          /^cli\/(?!shared\/)[^/]+\//.test(f) ||
          (WORK_FOLDERS.test(f) && !DEFINITIONS.has(f) && !ENTRY_SWITCHES.has(f)),
      ),
    ).toEqual([]);
    expect([...packages]).toEqual(['commander']);
  });

  it.each([['cli/serve/serve-command.ts'], ['cli/token/token-command.ts'], ['cli/doctor/doctor-command.ts']])(
    '%s loads no work of its command',
    (file) => {
      const { files, packages } = staticClosure(file);
      expect([...files].filter((f) => WORK_FOLDERS.test(f) && !DEFINITIONS.has(f))).toEqual([]);
      expect([...packages].filter((p) => HEAVY_PACKAGES.some((h) => p === h || p.startsWith(`${h}/`)))).toEqual([]);
    },
  );
});
