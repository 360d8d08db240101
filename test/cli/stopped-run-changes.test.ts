import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { finish, type RemapDueOptions } from '../../src/pipeline/jobs/remap-report.js';
import type { CommandDeps } from '../../src/cli/shared/command-context.js';
import { makeSummary } from '../../src/pipeline/run/summary.js';
import type { RemapResult } from '../../src/pipeline/remap/remap-engine.js';
import { openSink } from '../../src/pipeline/io/output/sink.js';
import { tempDir } from '../helpers/map-e2e-data.js';

// remap-due's changes file of a run that stopped (interrupted, or failed) after some batches were committed: the
// stopped run writes no changes file at all, whether -o exists or not, and acknowledges nothing: the changes of
// its committed batches stay pending in the state file, and the next completed run writes them first. A completed
// run's file is renamed into place and its changes are delivered with the rename.

const dir = tempDir('stopped-run-changes');
afterAll(() => dir.remove());

const counts: RemapResult['counts'] = {
  selected: 10,
  status: { mapped: 5, optout: 0, invalid: 0, error: 0 },
  changed: 1,
  unchanged: 4,
  stillDue: 0,
  changeRows: 1,
  batches: 2,
  batchesFailed: 0,
  batchesCommitted: 1,
};
const interrupted: RemapResult = { outcome: { kind: 'interrupted' }, counts, journalUpTo: 7, batchErrors: [] };
const quiet = { write: () => true } as unknown as CommandDeps['stderr'];
const deps = { stderr: quiet, stdout: quiet, env: {}, now: () => 0 } as CommandDeps;

async function endRun(
  path: string,
  result: RemapResult,
): Promise<{ code: number | string; acked: number[]; recorded: string[]; said: string[] }> {
  const sink = await openSink({ path, format: 'csv', header: ['hash'] });
  await sink.writeRows([['changed-hash']]);
  const options: RemapDueOptions = {
    state: 'state.db',
    nowS: 0,
    dryRun: false,
    output: { output: path, format: 'csv', quiet: true },
  };
  const acked: number[] = [];
  const recorded: string[] = [];
  const said: string[] = [];
  const summary = makeSummary({ command: 'remap-due', rows: 5, startedMs: 0, endedMs: 1 });
  const code = await finish(result, summary, sink, options, deps, (line) => void said.push(line), {
    state: { ackChanges: (_kind, upTo) => acked.push(upTo), setMeta: (key) => void recorded.push(key) },
    channel: 'remap',
    replayed: 0,
    upTo: 7,
  }).catch((err: Error) => err.message);
  return { code, acked, recorded, said };
}

/** Files of the directory named after `name`, temp files included. */
const filesLike = (name: string): string[] => readdirSync(dir.path).filter((f) => f.includes(name));

describe('remap-due stopped after committing batches', () => {
  it('leaves an existing changes file as it was; the changes stay pending', async () => {
    const path = join(dir.path, 'changes.csv');
    writeFileSync(path, 'an earlier night\n');
    const r = await endRun(path, interrupted);
    expect(r.code).toBe(130);
    expect(readFileSync(path, 'utf8')).toBe('an earlier night\n');
    expect(r.acked).toEqual([]);
    expect(r.recorded).toEqual([]);
  });

  it('writes no changes file where none exists; the changes stay pending for the next completed run', async () => {
    const path = join(dir.path, 'changes-new.csv');
    const r = await endRun(path, interrupted);
    expect(r.code).toBe(130);
    expect(existsSync(path)).toBe(false);
    expect(filesLike('changes-new')).toEqual([]);
    expect(r.acked).toEqual([]);
    expect(r.recorded).toEqual([]);
    expect(r.said.join('\n')).toMatch(/wait in the state file/);
  });

  it('a failed run writes no changes file either', async () => {
    const path = join(dir.path, 'changes-failed.csv');
    const failed: RemapResult = {
      ...interrupted,
      outcome: { kind: 'failed', error: Object.assign(new Error('the service is down'), { name: 'NetworkError' }) },
    };
    const r = await endRun(path, failed);
    expect(r.code).toMatch(/the service is down/);
    expect(existsSync(path)).toBe(false);
    expect(r.acked).toEqual([]);
    expect(r.recorded).toEqual([]);
  });

  it('a completed run renames its file into place and delivers its changes with it', async () => {
    const path = join(dir.path, 'changes-done.csv');
    const r = await endRun(path, { ...interrupted, outcome: { kind: 'completed' } });
    expect(r.code).toBe(0);
    expect(readFileSync(path, 'utf8')).toBe('hash\nchanged-hash\n');
    // recorded before the rename, acknowledged after it: the next run does not write them again
    expect(r.acked).toEqual([7]);
    expect(r.recorded).toContain('delivery_remap');
  });
});
