/** Turns the input arguments of a run (files, directories, wildcard patterns) into the ordered list of its parts. */
import { readdirSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import picomatch from 'picomatch';

/**
 * An input argument that names nothing to read: a pattern matching no file, an empty directory, a file given
 * twice. Found before anything is read or sent, so it is a usage problem. The message names the argument and a fix.
 */
export class InputPartsError extends Error {
  /** The line for the user, and the usage exit code (2): read by the CLI's error reporting, as for state errors. */
  readonly userMessage: string;
  readonly exitCode = 2;

  constructor(message: string) {
    super(message);
    this.name = 'InputPartsError';
    this.userMessage = message;
  }
}

/** Whether a name holds a wildcard this reader expands: `*`, `?` or `[`. */
export function hasWildcard(name: string): boolean {
  return /[*?[]/.test(name);
}

/**
 * The parts to read, in the order they are read: each argument in the order given; a directory as its files in
 * sorted order (by code unit, so the same on every machine), leaving out hidden and marker files (names starting
 * with `.` or `_`, such as `_SUCCESS`) and sub-directories; a pattern with `*`, `?` or `[...]` in its last path
 * part as the files it matches, sorted the same way. A path that does not exist and has no wildcard is kept as it
 * is, so that opening it reports the problem. `-` (stdin) can only be the one input.
 */
export function expandInputs(args: readonly string[]): string[] {
  if (args.length > 1 && args.includes('-')) {
    throw new InputPartsError("'-' (stdin) cannot be read together with files: give the files only, or pipe one input");
  }
  const parts: string[] = [];
  const seen = new Map<string, string>();
  for (const arg of args) {
    for (const part of expandOne(arg)) {
      const key = resolve(part);
      const earlier = seen.get(key);
      if (earlier !== undefined) {
        throw new InputPartsError(
          `'${part}' is given twice (also as '${earlier}'): name each input once, or its rows would be mapped twice`,
        );
      }
      seen.set(key, part);
      parts.push(part);
    }
  }
  return parts;
}

function expandOne(arg: string): string[] {
  if (arg === '-') return [arg];
  // an object store location is listed when the run starts (io/s3/s3-read.ts), not here
  if (/^s3:\/\//i.test(arg)) return [arg];
  const kind = kindOf(arg);
  if (kind === 'file') return [arg];
  if (kind === 'directory') {
    const files = filesIn(arg, (name) => !name.startsWith('.') && !name.startsWith('_'));
    if (files.length === 0) {
      throw new InputPartsError(
        `the directory '${arg}' holds no file to read (names starting with . or _ are left out); check the path`,
      );
    }
    return files;
  }
  const pattern = basename(arg);
  const dir = dirname(arg);
  if (hasWildcard(dir) && kindOf(dir) !== 'directory') {
    throw new InputPartsError(
      `'${arg}': only the last part of a path may hold a wildcard; name the directory, e.g. 'exports/part-*.csv.gz'`,
    );
  }
  if (!hasWildcard(pattern)) return [arg]; // missing: opening it says so
  if (kindOf(dir) !== 'directory') {
    throw new InputPartsError(`'${arg}': the directory '${dir}' does not exist; check the path`);
  }
  const matches = globMatcher(pattern);
  const files = filesIn(dir, matches);
  if (files.length === 0) {
    throw new InputPartsError(
      `'${arg}' matches no file in '${dir}'; check the pattern (quote it, as in '${pattern}', so that this tool expands it)`,
    );
  }
  return files;
}

function kindOf(path: string): 'file' | 'directory' | 'other' | 'missing' {
  try {
    const st = statSync(path);
    return st.isDirectory() ? 'directory' : st.isFile() ? 'file' : 'other';
  } catch {
    return 'missing';
  }
}

/** The regular files (symbolic links followed) of `dir` whose names `keep` accepts, as paths, sorted by code unit. */
function filesIn(dir: string, keep: (name: string) => boolean): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'unreadable';
    throw new InputPartsError(`the directory '${dir}' cannot be listed (${code}); check its permissions`);
  }
  return names
    .filter(keep)
    .sort(byCodeUnit)
    .map((name) => (dir === '.' ? name : join(dir, name)))
    .filter((path) => kindOf(path) === 'file');
}

function byCodeUnit(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * A matcher for one file name, as a shell matches it: `*` any run of characters, `?` one character, `[abc]`,
 * `[a-z]` and `[!abc]` (or `[^abc]`) one character of (or not of) a set; anything else matches itself. A name
 * starting with `.` is matched only by a pattern starting with `.`. A `[` without its `]` is itself.
 */
export function globMatcher(pattern: string): (name: string) => boolean {
  const matches = picomatch(shellPattern(pattern), { posix: true, nobrace: true, noextglob: true, nonegate: true });
  // picomatch lets a set such as `[.]` match a leading dot; a shell leaves dot files to patterns that start with one
  const dotPattern = pattern.startsWith('.');
  return (name) => (dotPattern || !name.startsWith('.')) && matches(name);
}

/** Characters picomatch reads as syntax (groups, braces, extglobs, escapes) that a shell pattern takes as text. */
const PICOMATCH_ONLY = new Set(['(', ')', '|', '{', '}', '+', '@', '!', '$', '^', '\\']);

/**
 * `pattern` with what only picomatch would read as syntax made literal: each such character outside a set becomes
 * a set of itself, and a `[` never closed is escaped. Sets are passed on as they are, a backslash in them escaped.
 */
function shellPattern(pattern: string): string {
  let out = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '[') {
      const end = setEnd(pattern, i);
      if (end === -1) out += '\\[';
      else {
        out += pattern.slice(i, end + 1).replaceAll('\\', '\\\\');
        i = end;
      }
    } else if (PICOMATCH_ONLY.has(c)) out += `[${c === '\\' || c === '^' || c === '!' ? `\\${c}` : c}]`;
    else out += c;
  }
  return out;
}

/** Where the set opened at `start` is closed, or -1: a `]` right after the `[` (or its `!` / `^`) is a member. */
function setEnd(pattern: string, start: number): number {
  let i = start + 1;
  if (pattern[i] === '!' || pattern[i] === '^') i++;
  if (pattern[i] === ']') i++;
  return pattern.indexOf(']', i);
}
