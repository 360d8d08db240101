import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openState } from '../../src/state/index.js';
import { integrityOf } from './tmp-state.js';
import { countsOf, lookupMany } from './lookups.js';

// The child runs the real module, compiled on its own into a directory inside the project (so that the SQLite
// driver, which src/state/sqlite-driver.ts requires from there, resolves to the project's node_modules): no tsx,
// and no dependence on the rest of src/ building.
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const ENV = 'kill-test';
const BATCH = 500;

let work: string;
const children: ChildProcess[] = [];

beforeAll(() => {
  mkdirSync(join(ROOT, '.tmp'), { recursive: true });
  work = mkdtempSync(join(ROOT, '.tmp', 'state-kill-'));
  const tsconfig = join(work, 'tsconfig.json');
  writeFileSync(
    tsconfig,
    JSON.stringify({
      extends: join(ROOT, 'tsconfig.json'),
      compilerOptions: {
        outDir: join(work, 'build'),
        rootDir: join(ROOT, 'src'),
        sourceMap: false,
        declaration: false,
      },
      include: [join(ROOT, 'src/state/**/*.ts')],
    }),
  );
  const tsc = spawnSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', tsconfig], {
    encoding: 'utf8',
  });
  if (tsc.status !== 0) throw new Error(`compiling src/state failed:\n${tsc.stdout}${tsc.stderr}`);
  // Batch k inserts BATCH new entries and rewrites every entry of batch k-1: a commit that landed in part
  // would leave a batch with missing entries or with old and new values mixed.
  writeFileSync(
    join(work, 'committer.mjs'),
    `import { openState } from './build/state/index.js';
const [path, from] = process.argv.slice(2);
const s = openState(path, { envFingerprint: '${ENV}' });
const type = (i) => (i % 2 ? 'phone' : 'email');
for (let k = Number(from); ; k++) {
  const updates = [];
  for (let i = 0; i < ${BATCH}; i++) updates.push({ type: type(i), hash: 'b' + k + '-' + i, outcome: { kind: 'mapped', u: 'u' + k, p: null, r: 1000 + k } });
  if (k > 0) for (let i = 0; i < ${BATCH}; i++) updates.push({ type: type(i), hash: 'b' + (k - 1) + '-' + i, outcome: { kind: 'mapped', u: 'again' + k, p: 'u' + (k - 1), r: 2000 + k } });
  s.commitBatch(updates, k);
  process.stdout.write(k + '\\n');
}
`,
  );
});

afterAll(() => {
  for (const c of children)
    if (c.exitCode === null && c.signalCode === null && c.pid !== undefined) process.kill(c.pid, 'SIGKILL');
  rmSync(work, { recursive: true, force: true });
});

/** Starts the committer at batch `from`, SIGKILLs it once it has reported `commits` commits; the last reported. */
function commitThenKill(path: string, from: number, commits: number): Promise<number> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [join(work, 'committer.mjs'), path, String(from)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    let out = '';
    let err = '';
    let last = -1;
    let killed = false;
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
      const lines = out.split('\n');
      out = lines.pop() ?? '';
      for (const line of lines) last = Number(line);
      if (!killed && last >= from + commits - 1 && child.pid !== undefined) {
        killed = true;
        const pid = child.pid;
        // somewhere inside one of the next batches, not just after a report
        setTimeout(() => process.kill(pid, 'SIGKILL'), 1 + Math.random() * 25);
      }
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
    child.on('exit', (code, signal) => {
      if (signal === 'SIGKILL') resolvePromise(last);
      else reject(new Error(`committer ended by itself (code ${code}): ${err}`));
    });
  });
}

describe('a process killed while committing', () => {
  it('leaves a sound file holding every reported batch whole and no part of any other', async () => {
    const path = join(work, 'killed.db');
    let resumeAt = 0;
    for (let round = 0; round < 4; round++) {
      // each round reopens for writing after a kill (WAL recovery) and goes on from what is there
      const lastReported = await commitThenKill(path, resumeAt, 10);
      const s = openState(path, { envFingerprint: ENV, create: false });
      try {
        resumeAt = checkWholeBatches(s, lastReported);
      } finally {
        s.close();
      }
    }
  });
});

/** Checks the file after a kill and returns how many batches it holds. */
function checkWholeBatches(s: ReturnType<typeof openState>, lastReported: number): number {
  expect(integrityOf(s.path)).toBe('ok');
  const batches = countBatches(s);
  // every reported commit is there; at most one more finished before its line was written
  expect(batches - 1).toBeGreaterThanOrEqual(lastReported);
  expect(batches - 1).toBeLessThanOrEqual(lastReported + 1);
  expect(countsOf(s).entries).toBe(batches * BATCH);
  const found = lookupMany(s, Array.from({ length: batches }, (_, k) => batchKeys(k)).flat());
  for (let k = 0; k < batches; k++) {
    const entries = batchKeys(k).flatMap((key) => found.get(`${key.type}:${key.hash}`) ?? []);
    expect(entries, `batch ${k}`).toHaveLength(BATCH);
    const rewritten = k < batches - 1;
    const values = new Set(entries.map((e) => `${e.u}|${e.p}|${e.r}|${e.lastMappedS}`));
    expect([...values], `batch ${k}`).toEqual([
      rewritten ? `again${k + 1}|u${k}|${2000 + k + 1}|${k + 1}` : `u${k}|null|${1000 + k}|${k}`,
    ]);
  }
  return batches;
}

function batchKeys(k: number): { type: 'email' | 'phone'; hash: string }[] {
  return Array.from({ length: BATCH }, (_, i) => ({
    type: i % 2 ? ('phone' as const) : ('email' as const),
    hash: `b${k}-${i}`,
  }));
}

/** Batches present: the first k whose first entry is missing. */
function countBatches(s: ReturnType<typeof openState>): number {
  let k = 0;
  while (s.lookupStored('email', [`b${k}-0`]).at.length === 1) k++;
  return k;
}
