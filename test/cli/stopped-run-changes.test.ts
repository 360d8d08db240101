import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { finish, type RemapDueFlags } from '../../src/cli/remap-due/remap-report.js';
import type { CommandDeps } from '../../src/cli/shared/command-context.js';
import { makeSummary } from '../../src/cli/shared/summary.js';
import type { RemapResult } from '../../src/pipeline/remap/remap-engine.js';
import { openSink } from '../../src/pipeline/table/sink.js';
import { tempDir } from '../helpers/map-e2e-data.js';

// remap-due's changes file of a run that stopped (interrupted, or failed) after some batches were committed: the
// stopped run may write a new file with their changes, delivered with its rename (no later run writes them again),
// but never replaces an existing one (the file of an earlier night under the same name): then they stay pending in
// the state file until a completed run has written them.

const dir = tempDir('stopped-run-changes');
afterAll(() => dir.remove());

const interrupted: RemapResult = {
  outcome: { kind: 'interrupted' },
  counts: {
    selected: 10,
    status: { mapped: 5, optout: 0, invalid: 0, error: 0 },
    changed: 1,
    unchanged: 4,
    stillDue: 0,
    changeRows: 1,
    batches: 2,
    batchesFailed: 0,
    batchesCommitted: 1,
  },
  journalUpTo: 7,
  batchErrors: [],
};
const quiet = { write: () => true } as unknown as CommandDeps['stderr'];
const deps = { stderr: quiet, stdout: quiet, env: {}, now: () => 0 } as CommandDeps;

async function stoppedRun(path: string): Promise<{ code: number; acked: number[]; recorded: string[] }> {
  const sink = await openSink({ path, format: 'csv', header: ['hash'] });
  await sink.writeRows([['changed-hash']]);
  const flags: RemapDueFlags = { connection: {}, dryRun: false, output: { output: path, format: 'csv', quiet: true } };
  const acked: number[] = [];
  const recorded: string[] = [];
  const summary = makeSummary({ command: 'remap-due', rows: 5, startedMs: 0, endedMs: 1 });
  const code = await finish(interrupted, summary, sink, flags, deps, () => undefined, {
    state: { ackChanges: (_kind, upTo) => acked.push(upTo), setMeta: (key) => void recorded.push(key) },
    kind: 'remap',
    replayed: 0,
    upTo: 7,
  });
  return { code, acked, recorded };
}

describe('remap-due stopped after committing batches', () => {
  it('leaves an existing changes file as it was; the changes stay pending', async () => {
    const path = join(dir.path, 'changes.csv');
    writeFileSync(path, 'an earlier night\n');
    const r = await stoppedRun(path);
    expect(r.code).toBe(130);
    expect(readFileSync(path, 'utf8')).toBe('an earlier night\n');
    expect(r.acked).toEqual([]);
    expect(r.recorded).toEqual([]);
  });

  it('writes a new changes file with what was committed; the changes are delivered with it', async () => {
    const path = join(dir.path, 'changes-new.csv');
    const r = await stoppedRun(path);
    expect(r.code).toBe(130);
    expect(existsSync(path)).toBe(true);
    expect(readFileSync(path, 'utf8')).toBe('hash\nchanged-hash\n');
    // recorded before the rename, acknowledged after it: the next run does not write them again
    expect(r.acked).toEqual([7]);
    expect(r.recorded).toContain('delivery_remap');
  });
});
