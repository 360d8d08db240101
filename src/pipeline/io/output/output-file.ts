// Where an output file is really written: its symlink's target, a private temp file beside it, stale temps removed.
import { randomBytes } from 'node:crypto';
import { lstatSync, readdirSync, readlinkSync, realpathSync, statSync, unlinkSync } from 'node:fs';
import { type FileHandle, open, rename, rm, stat, unlink } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join, resolve } from 'node:path';
import { OutputError, type PreparedOutput, type SealedOutput } from '../table.js';

/** Symlinks followed at most, as the kernel's own limit; a longer chain is a loop. */
const MAX_SYMLINK_HOPS = 40;

/**
 * The file an output path names once its symlinks are followed: `-o link.csv` writes to what link.csv points at
 * and leaves the link in place (renaming a temp file onto the path would replace the link by a regular file).
 * A dangling link is followed to where its target would be. A path that does not exist yet is itself.
 */
export function writeThroughTarget(path: string): string {
  let current = resolve(path);
  for (let hop = 0; hop < MAX_SYMLINK_HOPS; hop++) {
    let isLink: boolean;
    try {
      isLink = lstatSync(current).isSymbolicLink();
    } catch {
      // not there (yet): the temp file and the rename go where it will be
      return current;
    }
    if (!isLink) return current;
    const link = readlinkSync(current);
    current = isAbsolute(link) ? link : resolve(dirname(current), link);
  }
  return current;
}

/**
 * The temp file of an output: hidden, beside the target (the same file system, so the final rename is atomic),
 * named by this process's id so that a later run can tell whether its writer is still alive.
 */
export function tempPathFor(target: string, suffix = ''): string {
  return join(dirname(target), `.${basename(target)}.${process.pid}${suffix}.tmp`);
}

/** Temp files hold raw input rows: only their owner may read them. */
export const TEMP_FILE_MODE = 0o600;

/**
 * The mode the finished output gets: an existing file keeps its own (someone may have narrowed it on purpose),
 * a new one gets `mode` less the umask, as a plain open() would have given it.
 */
export function finalModeFor(target: string, mode: number): number {
  try {
    return statSync(target).mode & 0o7777;
  } catch {
    return mode & ~process.umask();
  }
}

/** Whether process `pid` still runs (this process does): a temp file of a live writer is left alone. */
export function processAlive(pid: number): boolean {
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists but belongs to someone else
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** `.<name>.<pid>.tmp` or `.<name>.<pid>.<8 hex>.tmp`: the temp files tempPathFor names, and nothing else. */
const TEMP_NAME = /^\.(.+)\.tmp$/;
const PID = /^\d+$/;
const RANDOM_PART = /^[0-9a-f]{8}$/;

/**
 * The process ids a temp file's name may carry. A name whose last part is digits can be read two ways
 * (`.report.2026.4242.12345678.tmp`: pid 4242 with a random part, or pid 12345678 of `report.2026.4242`), so
 * both are returned and the file counts as its writer's while either process lives. Empty: not a temp file of ours.
 */
function writerPids(fileName: string): number[] {
  const m = TEMP_NAME.exec(fileName);
  if (m === null) return [];
  const parts = m[1].split('.');
  const pids: number[] = [];
  // .<name>.<pid>.tmp
  if (parts.length >= 2 && PID.test(parts[parts.length - 1])) pids.push(Number(parts[parts.length - 1]));
  // .<name>.<pid>.<random>.tmp
  if (parts.length >= 3 && RANDOM_PART.test(parts[parts.length - 1]) && PID.test(parts[parts.length - 2]))
    pids.push(Number(parts[parts.length - 2]));
  return pids;
}

/**
 * Removes the temp files that earlier runs writing into `target`'s directory left behind when they were killed
 * (kill -9, a power cut): `.<name>.<pid>.tmp` and `.<name>.<pid>.<hex>.tmp` whose process is gone, whatever the
 * name (a nightly run writes a new dated name every day, so the same name may never come again). They hold input
 * rows, so they must not stay. A temp file of a live process (a run writing there right now) is left alone, and so
 * is anything that is not a regular file of this pattern. Returns the names removed.
 */
export function removeStaleTemps(target: string): string[] {
  const dir = dirname(target);
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    const pids = writerPids(name);
    if (pids.length === 0 || pids.some(processAlive)) continue;
    const path = join(dir, name);
    try {
      if (!lstatSync(path).isFile()) continue;
      unlinkSync(path);
      removed.push(name);
    } catch {
      // gone already, or not ours to remove: the next run tries again
    }
  }
  return removed;
}

/** What identifies a file: its real path, and device and inode while it exists (a hard link has another path). */
export interface FileIdentity {
  real: string;
  inode?: string;
}

export function fileIdentity(path: string): FileIdentity {
  const absolute = resolve(path);
  let real: string;
  try {
    real = realpathSync(absolute);
  } catch {
    const target = writeThroughTarget(absolute);
    try {
      real = join(realpathSync(dirname(target)), basename(target));
    } catch {
      real = target;
    }
  }
  try {
    const s = statSync(absolute);
    return { real, inode: `${s.dev}:${s.ino}` };
  } catch {
    return { real };
  }
}

export function sameFile(a: FileIdentity, b: FileIdentity): boolean {
  return a.real === b.real || (a.inode !== undefined && a.inode === b.inode);
}

/**
 * Writes a small text file (a summary) whole or not at all: through a private temp file beside its target,
 * fsynced, given its final mode and renamed into place, so a reader never sees half of it.
 */
export async function writeTextAtomically(path: string, text: string, mode = 0o644): Promise<void> {
  const target = writeThroughTarget(path);
  removeStaleTemps(target);
  const temp = tempPathFor(target, `.${randomBytes(4).toString('hex')}`);
  try {
    const handle = await open(temp, 'wx', TEMP_FILE_MODE);
    try {
      await handle.writeFile(text);
      await handle.sync();
      await handle.chmod(finalModeFor(target, mode));
    } finally {
      await handle.close();
    }
    await rename(temp, target);
  } catch (err) {
    await rm(temp, { force: true });
    throw err;
  }
}

/** Why an output file cannot be written, as one line naming the path and a fix. */
export function fileFailure(target: string, err: Error): OutputError {
  const code = (err as NodeJS.ErrnoException).code;
  switch (code) {
    case 'ENOENT':
      return new OutputError(target, 'the directory does not exist', 'create it first or choose another -o path');
    case 'EACCES':
    case 'EPERM':
      return new OutputError(target, 'permission denied', 'choose a directory you can write to');
    case 'ENOSPC':
      return new OutputError(target, 'the disk is full', 'free some space and run the same command again');
    case 'EISDIR':
      return new OutputError(target, 'is a directory', 'give a file name with -o');
    default:
      return new OutputError(target, `cannot be written (${code ?? err.message})`);
  }
}

/** The finished temp file `tmp` of an output as it will be at `target` once renamed (see SealedOutput). */
async function sealedOutput(target: string, tmp: string): Promise<SealedOutput> {
  const s = await stat(tmp);
  return { target: resolve(target), dev: s.dev, ino: s.ino, size: s.size, mtimeMs: s.mtimeMs };
}

/** An output being written: where the rename goes (a symlink's target) and the private temp file beside it. */
export interface OutputTemp {
  target: string;
  tmp: string;
  handle: FileHandle;
}

/**
 * Opens the temp file of an output at `path`: written through a symlink to its target, 0600 (it holds input rows),
 * after removing stale temps of dead processes. Every file sink starts here, so the rules cannot drift apart.
 */
export async function openOutputTemp(path: string): Promise<OutputTemp> {
  const target = writeThroughTarget(path);
  removeStaleTemps(target);
  const tmp = tempPathFor(target);
  try {
    // a leftover of this very pid (a reused pid) is replaced, never reopened with its old mode
    await unlink(tmp).catch(() => undefined);
    return { target, tmp, handle: await open(tmp, 'wx', TEMP_FILE_MODE) };
  } catch (err) {
    throw fileFailure(path, err as Error);
  }
}

/** Makes a rename itself durable; not possible on every platform (Windows), so best effort. */
export async function syncDirectory(dir: string): Promise<void> {
  let handle: FileHandle | undefined;
  try {
    handle = await open(dir, 'r');
    await handle.sync();
  } catch {
    // the data is already synced; only the directory entry's durability is at stake
  } finally {
    await handle?.close().catch(() => undefined);
  }
}

/**
 * A complete, closed temp file and the rename that puts it in place. A target that is a directory is found here,
 * before any output of the run is renamed, rather than by a rename that fails after another output was replaced.
 */
export async function preparedFile(shown: string, tmp: string, target: string): Promise<PreparedOutput> {
  const existing = await stat(target).catch(() => undefined);
  if (existing?.isDirectory()) {
    await unlink(tmp).catch(() => undefined);
    throw fileFailure(shown, Object.assign(new Error('is a directory'), { code: 'EISDIR' }));
  }
  return {
    async publish(sealed) {
      if (sealed !== undefined) {
        try {
          await sealed(await sealedOutput(target, tmp));
        } catch (err) {
          await unlink(tmp).catch(() => undefined);
          throw err;
        }
      }
      try {
        await rename(tmp, target);
      } catch (err) {
        await unlink(tmp).catch(() => undefined);
        throw fileFailure(shown, err as Error);
      }
      await syncDirectory(dirname(target));
    },
    async discard() {
      await unlink(tmp).catch(() => undefined);
    },
  };
}
