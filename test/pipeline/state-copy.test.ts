import { afterAll, describe, expect, it } from 'vitest';
import { copyState } from '../../src/pipeline/jobs/state-copy.js';
import { exportState } from '../../src/pipeline/jobs/state-export.js';
import type { StateRecord } from '../../src/state/backend.js';
import { openFileState } from '../../src/state/file-backend.js';
import { b64, ENV, tmpStates } from '../state/tmp-state.js';
import { PassThrough } from 'node:stream';

const tmp = tmpStates('uid2-state-copy-');
afterAll(() => tmp.cleanup());

/** n records of every kind: mapped with r, due v2-style, tombstones with an opt-out time, invalids. */
function records(n: number): StateRecord[] {
  const out: StateRecord[] = [];
  for (let i = 0; i < n; i++) {
    const none = {
      due: false,
      u: null,
      p: null,
      r: null,
      bucketId: null,
      lastOptoutCheckS: null,
      optedOutSinceMs: null,
    };
    const type = i % 3 === 0 ? 'phone' : 'email';
    const hash = b64(`h${i}`);
    if (i % 5 === 4)
      out.push({
        ...none,
        type,
        hash,
        status: 'optout',
        lastMappedS: 1_700_000_000 + i,
        optedOutSinceMs: 1_700_000_000_000 + i,
      });
    else if (i % 7 === 6) out.push({ ...none, type, hash, status: 'invalid', lastMappedS: 1_700_000_000 + i });
    else
      out.push({
        ...none,
        type,
        hash,
        status: 'mapped',
        u: b64(`u${i}`),
        p: i % 2 === 0 ? b64(`p${i}`) : null,
        r: 1_800_000_000 + ((i * 7919) % 10_000),
        lastMappedS: 1_700_000_000 + i,
        lastOptoutCheckS: i % 4 === 0 ? 1_750_000_000 : null,
      });
  }
  return out;
}

/** A state file of `n` records and a few pending change rows. */
async function sourceState(n: number, env = ENV): Promise<string> {
  const path = tmp.file();
  const state = await openFileState(path, { envFingerprint: env });
  await state.writeRecords(records(n));
  const runId = await state.startRun('remap-due', '{}', 1_700_000_000);
  await state.commitBatch([], 1_700_000_000, { runId, channel: 'remap', rows: ['{"a":1}', '{"b":2}'] });
  await state.close();
  return path;
}

async function exported(path: string): Promise<string> {
  const out = new PassThrough();
  const chunks: Buffer[] = [];
  out.on('data', (c: Buffer) => chunks.push(c));
  await exportState(path, { format: 'jsonl' }, out);
  return Buffer.concat(chunks).toString('utf8');
}

async function allRecords(path: string): Promise<StateRecord[]> {
  const state = await openFileState(path, { envFingerprint: ENV });
  try {
    return (await state.readRecords(0, 1_000_000)).records;
  } finally {
    await state.close();
  }
}

async function pendingOf(path: string): Promise<string[]> {
  const state = await openFileState(path, { envFingerprint: ENV });
  try {
    return (await state.pendingChanges('remap')).map((c) => c.row);
  } finally {
    await state.close();
  }
}

describe('state copy', () => {
  it('copies every value of every entry, the meta and the pending changes, into a new file', async () => {
    const src = await sourceState(50);
    const dst = tmp.file();
    const result = await copyState(src, dst, { page: 7 });
    expect(result).toMatchObject({ entries: 50, changes: 2, resumed: false, complete: false });
    expect(await allRecords(dst)).toEqual(await allRecords(src));
    expect(await exported(dst)).toBe(await exported(src));
    expect(await pendingOf(dst)).toEqual(['{"a":1}', '{"b":2}']);
    const [a, b] = await Promise.all(
      [src, dst].map(async (p) => {
        const s = await openFileState(p, { envFingerprint: ENV });
        const m = await s.meta();
        await s.close();
        return m;
      }),
    );
    expect(b).toEqual(a);
  });

  it("copies the pending changes of every channel, a shard's as well as a whole run's", async () => {
    const src = await sourceState(5);
    const state = await openFileState(src, { envFingerprint: ENV });
    const runId = await state.startRun('remap-due', '{}', 1_700_000_000);
    await state.commitBatch([], 1_700_000_000, { runId, channel: 'remap 0/3', rows: ['{"s":0}'] });
    await state.commitBatch([], 1_700_000_000, { runId, channel: 'optout 1/2', rows: ['{"o":1}', '{"o":2}'] });
    await state.close();
    const dst = tmp.file();
    expect(await copyState(src, dst)).toMatchObject({ entries: 5, changes: 5 });
    const copy = await openFileState(dst, { envFingerprint: ENV });
    try {
      expect(await copy.pendingChangeCounts()).toEqual({ remap: 2, 'remap 0/3': 1, 'optout 1/2': 2 });
      expect((await copy.pendingChanges('optout 1/2')).map((c) => c.row)).toEqual(['{"o":1}', '{"o":2}']);
    } finally {
      await copy.close();
    }
  });

  it('goes on from the last page a killed copy committed, and a finished copy run again does nothing', async () => {
    const src = await sourceState(40);
    const dst = tmp.file();
    let pages = 0;
    const killed = copyState(src, dst, {
      page: 6,
      onPage: () => {
        if (++pages === 3) throw new Error('killed at a page boundary');
      },
    });
    await expect(killed).rejects.toThrow('killed at a page boundary');
    expect((await allRecords(dst)).length).toBe(18);
    const resumed = await copyState(src, dst, { page: 6 });
    expect(resumed).toMatchObject({ entries: 22, changes: 2, resumed: true, complete: false });
    expect(await exported(dst)).toBe(await exported(src));
    expect(await pendingOf(dst)).toEqual(['{"a":1}', '{"b":2}']);
    expect(await copyState(src, dst)).toMatchObject({ entries: 0, changes: 0, complete: true });
    expect(await pendingOf(dst)).toEqual(['{"a":1}', '{"b":2}']);
  });

  it('refuses the same state, through another path to it, and writes nothing', async () => {
    const src = await sourceState(3);
    const other = src.replace(/([^/]+)$/, './$1');
    await expect(copyState(src, other)).rejects.toThrow(
      /^state copy: the source and the destination are the same state/,
    );
  });

  it('refuses a destination of another environment, or with entries of its own', async () => {
    const src = await sourceState(3);
    const prod = await sourceState(2, 'uid2:prod');
    await expect(copyState(src, prod)).rejects.toThrow(
      /^state copy: .* holds entries of environment uid2:prod, and .* is of uid2:integ; a state never mixes environments/,
    );
    const mine = await sourceState(2);
    await expect(copyState(src, mine)).rejects.toThrow(/already holds entries that are not a copy of/);
    expect((await allRecords(mine)).length).toBe(2);
  });
});
