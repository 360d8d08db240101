import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmdirSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const BIN = join(ROOT, 'bin', 'uid2-batch.js');
const MAIN_JS = join(ROOT, 'dist', 'cli', 'main.js');
const LOCK = join(ROOT, 'dist', '.e2e-build.lock');

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

function isFresh(): boolean {
  return existsSync(MAIN_JS) && newestMtime(join(ROOT, 'dist')) >= newestMtime(join(ROOT, 'src'));
}

/**
 * Builds dist/ once when src/ is newer (`npm test` builds first, so in CI this is a no-op). Test files run in
 * parallel workers, so a lock directory makes one of them build while the others wait.
 */
export function ensureBuilt(): void {
  if (isFresh()) return;
  mkdirSync(join(ROOT, 'dist'), { recursive: true });
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      mkdirSync(LOCK);
      break;
    } catch {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${LOCK} (remove it if no build is running)`);
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
      if (isFresh()) return;
    }
  }
  try {
    if (isFresh()) return;
    try {
      execFileSync(
        process.execPath,
        [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(ROOT, 'tsconfig.json')],
        { cwd: ROOT, stdio: 'pipe' },
      );
    } catch {
      // type errors elsewhere in the tree still emit JavaScript; the check below is what matters
    }
    if (!existsSync(MAIN_JS)) throw new Error('the build did not produce dist/cli/main.js');
  } finally {
    rmdirSync(LOCK);
  }
}
