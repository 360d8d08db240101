import { randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import { removeStaleTemps, tempPathFor, writeThroughTarget } from '../../pipeline/io/output/output-file.js';
import type { TokenIdentity } from '../../pipeline/tokens/tokens.js';
import { EXIT, UserError } from '../shared/exit-codes.js';

/**
 * Files and streams of the token commands. An identity file holds a refresh_response_key (a secret), so it is
 * written 0600 and atomically: a crash mid-write never leaves a half identity where the last good one was.
 */

/** §2.2 order, so files and stdout read the same way every time. */
export function identityJson(identity: TokenIdentity): string {
  const ordered: TokenIdentity = {
    advertising_token: identity.advertising_token,
    refresh_token: identity.refresh_token,
    identity_expires: identity.identity_expires,
    refresh_from: identity.refresh_from,
    refresh_expires: identity.refresh_expires,
    refresh_response_key: identity.refresh_response_key,
  };
  return `${JSON.stringify(ordered, null, 2)}\n`;
}

/** Temp file beside the target (same file system, so rename is atomic), created 0600 and fsynced before the rename. */
export function writePrivateFileAtomic(path: string, text: string, what: string): void {
  // a symlinked identity file is written through to its target, and the link stays
  const target = writeThroughTarget(path);
  removeStaleTemps(target);
  const temp = tempPathFor(target, `.${randomBytes(4).toString('hex')}`);
  let fd: number | undefined;
  try {
    fd = openSync(temp, 'wx', 0o600);
    writeSync(fd, text);
    fsyncSync(fd);
    closeSync(fd);
    fd = undefined;
    renameSync(temp, target);
  } catch (err) {
    if (fd !== undefined) closeSync(fd);
    rmSync(temp, { force: true });
    throw new UserError(`cannot write ${what} ${path}: ${fsReason(err)}`, EXIT.failed);
  }
}

export function readTextFile(path: string, what: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new UserError(`cannot read ${what} ${path}: ${fsReason(err)}`);
  }
}

/** A secret kept in a file: one value, surrounding whitespace and the final newline dropped. */
export function readValueFile(path: string, what: string): string {
  const value = readTextFile(path, what).trim();
  if (value === '') throw new UserError(`${what} ${path} is empty`);
  return value;
}

function fsReason(err: unknown): string {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  switch (code) {
    case 'ENOENT':
      return 'no such file or directory';
    case 'EACCES':
    case 'EPERM':
      return 'permission denied';
    case 'EISDIR':
      return 'it is a directory';
    default:
      return err instanceof Error ? err.message : String(err);
  }
}

export async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * A value piped in (`--email -`): only the line ending that `echo` adds is dropped, because spaces and tabs are
 * part of the value the operator normalizes (or rejects).
 */
export function stripLineEnding(text: string): string {
  return text.replace(/\r?\n$/, '');
}
