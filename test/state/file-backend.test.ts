import { afterAll, describe, expect, it } from 'vitest';
import type { StateRecord } from '../../src/state/backend.js';
import { openFileState } from '../../src/state/file-backend.js';
import { describeState, isPostgresState } from '../../src/state/open-backend.js';
import { b64, ENV, tmpStates } from './tmp-state.js';

const tmp = tmpStates('uid2-file-backend-');
afterAll(() => tmp.cleanup());

/** Records with every value set somewhere: a mapped v3 entry, a due v2 one, a tombstone, an invalid, text values. */
function sampleRecords(): StateRecord[] {
  const none = { due: false, u: null, p: null, r: null, bucketId: null, lastOptoutCheckS: null, optedOutSinceMs: null };
  return [
    {
      ...none,
      type: 'email',
      hash: b64('a'),
      status: 'mapped',
      u: b64('ua'),
      p: b64('pa'),
      r: 1_900_000_000,
      lastMappedS: 1_800_000_000,
      lastOptoutCheckS: 1_800_000_100,
    },
    {
      ...none,
      type: 'phone',
      hash: b64('b'),
      status: 'mapped',
      due: true,
      u: b64('ub'),
      bucketId: 'bkt-7',
      lastMappedS: 1_700_000_000,
    },
    {
      ...none,
      type: 'email',
      hash: b64('c'),
      status: 'optout',
      lastMappedS: 1_700_000_001,
      optedOutSinceMs: 1_700_000_123_456,
    },
    { ...none, type: 'phone', hash: 'not-base64!', status: 'invalid', lastMappedS: 1_700_000_002 },
    {
      ...none,
      type: 'email',
      hash: b64('e'),
      status: 'mapped',
      u: 'raw-uid-text',
      r: 1_900_000_500.5,
      lastMappedS: 1_700_000_003,
    },
  ];
}

describe('the file state behind StateBackend', () => {
  it('gives back every value of the records it was given, in id order, a page at a time', async () => {
    const state = await openFileState(tmp.file(), { envFingerprint: ENV });
    const records = sampleRecords();
    await state.writeRecords(records);
    const first = await state.readRecords(0, 2);
    expect(first.records).toEqual(records.slice(0, 2));
    const rest = await state.readRecords(first.last, 10);
    expect(rest.records).toEqual(records.slice(2));
    expect(await state.readRecords(rest.last, 10)).toEqual({ records: [], last: rest.last });
    await state.close();
  });

  it('replaces the entry of the same type and hash, and its lookups and due list see the copy', async () => {
    const state = await openFileState(tmp.file(), { envFingerprint: ENV });
    const [a] = sampleRecords();
    await state.writeRecords([a]);
    await state.writeRecords([{ ...a, u: b64('ua2'), r: 1_600_000_000 }]);
    const { records } = await state.readRecords(0, 10);
    expect(records).toEqual([{ ...a, u: b64('ua2'), r: 1_600_000_000 }]);
    expect((await state.lookupStored('email', [a.hash])).u).toEqual([b64('ua2')]);
    expect(await state.countDue(1_700_000_000)).toBe(1);
    await state.close();
  });

  it('reads a file of another environment as it is with anyEnvironment, and writes nothing then', async () => {
    const path = tmp.file();
    const writer = await openFileState(path, { envFingerprint: 'euid:prod' });
    await writer.writeRecords(sampleRecords());
    await writer.close();
    const reader = await openFileState(path, { envFingerprint: ENV, anyEnvironment: true });
    expect((await reader.meta()).envFingerprint).toBe('euid:prod');
    const exported = [];
    for await (const e of reader.entries()) exported.push(e.hash);
    expect(exported).toEqual(sampleRecords().map((r) => r.hash));
    await expect(reader.writeRecords(sampleRecords())).rejects.toThrow(/read-only/);
    await reader.close();
    await reader.close();
  });
});

describe('describeState', () => {
  it('shows a database URL without its password, wherever it is given', () => {
    for (const spec of [
      'postgres://batch:s3cret-pw@db.example:5432/uid2?schema=nightly',
      'postgresql://batch:s3cret-pw@db.example/uid2',
      'postgres://batch@db.example/uid2?password=s3cret-pw&schema=a',
      'postgres://batch:s3cret-pw@[::1:5432/uid2',
    ]) {
      expect(isPostgresState(spec)).toBe(true);
      const shown = describeState(spec);
      expect(shown).not.toContain('s3cret-pw');
      expect(shown).toContain('batch');
    }
    expect(describeState('postgres://batch:pw@db.example:5432/uid2?schema=nightly')).toBe(
      'postgres://batch@db.example:5432/uid2?schema=nightly',
    );
  });

  it('shows a file path as it is given', () => {
    expect(describeState('./state/nightly.db')).toBe('./state/nightly.db');
    expect(isPostgresState('./postgres://x')).toBe(false);
  });
});
