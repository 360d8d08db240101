// scripts/compare-outputs.mjs: HEAD's build against this tree's on the fast subset finds every output the same and
// removes its worktree; a doctored output is found, with its first differing byte.
import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, ROOT } from '../helpers/map-e2e-build.js';
import { tempDir } from '../helpers/map-e2e-data.js';

const SCRIPT = join(ROOT, 'scripts', 'compare-outputs.mjs');
const dir = tempDir('uid2-compare-outputs-');
const kept = join(dir.path, 'kept');

function compare(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const run = spawnSync(process.execPath, [SCRIPT, ...args], { cwd: ROOT, encoding: 'utf8' });
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}

/** The comparison builds HEAD in a git worktree: a copy of the tree without its repository has nothing to build. */
const inRepository = spawnSync('git', ['rev-parse', '--verify', 'HEAD'], { cwd: ROOT }).status === 0;
const worktrees = (): string => spawnSync('git', ['worktree', 'list'], { cwd: ROOT, encoding: 'utf8' }).stdout;

let first: ReturnType<typeof compare>;

beforeAll(() => {
  if (!inRepository) return;
  ensureBuilt();
  first = compare(['--base', 'HEAD', '--fast', '--keep', kept]);
}, 900_000);

afterAll(() => dir.remove());

describe.skipIf(!inRepository)('compare-outputs, HEAD against this tree (--fast)', () => {
  it('finds every output the same and exits 0', () => {
    expect(first.stderr).not.toMatch(/compare-outputs: (?!building|\d+ cases)/);
    expect(first.stdout).toMatch(/^all the same: HEAD and this tree$/m);
    expect(first.stdout).not.toMatch(/DIFFERENT|UNEXPECTED/);
    expect(first.status).toBe(0);
  });

  it('compares the outputs of map (CSV, JSONL, Parquet, --state twice), hash, remap-due and optout-check', () => {
    for (const file of [
      'map-csv/out.csv',
      'map-csv/rejects.csv',
      'map-jsonl/out.jsonl',
      'map-parquet/out.parquet',
      'map-state/second.csv',
      'map-state/export.csv',
      'hash/out.csv',
      'remap/changes.csv',
      'remap/verdicts.csv',
      'remap/1.summary.json',
    ])
      expect(first.stdout).toMatch(new RegExp(`^same +${file.replace(/\./g, '\\.')} `, 'm'));
  });

  it('removes the worktree it built the base in', () => {
    expect(worktrees()).not.toMatch(/uid2-batch-compare-base-/);
  });

  it('with --parquet cells, compares Parquet outputs by the cells read back', () => {
    const run = compare(['--compare', kept, '--parquet', 'cells']);
    expect(run.stdout).toMatch(/^same +map-parquet\/out\.parquet \([\d,]+ bytes of cells as JSON\)$/m);
    expect(run.status).toBe(0);
  });

  it('finds a doctored output: DIFFERENT, the first differing byte, exit 1', () => {
    const out = join(kept, 'head', 'map-csv', 'out.csv');
    const bytes = readFileSync(out);
    bytes[1000] = bytes[1000] === 0x41 ? 0x42 : 0x41;
    writeFileSync(out, bytes);
    rmSync(join(kept, 'head', 'map-state', 'export.csv'));
    const run = compare(['--compare', kept]);
    expect(run.stdout).toMatch(/^DIFFERENT +map-csv\/out\.csv: first differing byte at offset 1,000 /m);
    expect(run.stdout).toMatch(/^DIFFERENT +map-state\/export\.csv: only in base$/m);
    expect(run.stdout).toMatch(/^same +map-jsonl\/out\.jsonl /m);
    expect(run.status).toBe(1);
  });

  it('refuses an unknown case in one line, exit 2', () => {
    const run = compare(['--only', 'no-such-case', '--base', 'HEAD']);
    expect(run.stderr).toMatch(/^compare-outputs: unknown case no-such-case; the cases: map-csv, /);
    expect(run.status).toBe(2);
  });
});
