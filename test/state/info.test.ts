import { existsSync, statSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { SCHEMA_VERSION, StateLockedError, type EntryUpdate } from '../../src/state/index.js';
import { ENV, b64, tailOf, tmpStates } from './tmp-state.js';
import { countsOf } from './lookups.js';

const t = tmpStates('uid2-info-');
afterAll(() => t.cleanup());

const DAY = 86_400;
const T0 = 1_767_225_600; // 2026-01-01T00:00:00Z

function seed(path: string): void {
  const s = t.open(path);
  const updates: EntryUpdate[] = [];
  for (let i = 0; i < 30; i++)
    updates.push({
      type: i % 2 ? 'phone' : 'email',
      hash: b64(`i${i}`),
      outcome: { kind: 'mapped', u: b64(`u${i}`), p: i % 5 ? null : b64(`p${i}`), r: T0 + (i % 3) * DAY },
    });
  updates.push({ type: 'email', hash: b64('gone'), outcome: { kind: 'optout', optedOutSinceMs: 1 } });
  updates.push({ type: 'email', hash: b64('bad'), outcome: { kind: 'invalid' } });
  s.commitBatch(updates, T0 - DAY);
  s.close();
}

describe('what a store says of its file', () => {
  it('meta: schema, environment, api; counts by status', () => {
    const path = t.file();
    seed(path);
    const s = t.open(path);
    expect(s.meta()).toMatchObject({ schemaVersion: SCHEMA_VERSION, envFingerprint: ENV, api: 'v3' });
    expect(tailOf(path)).toBe(32);
    expect(countsOf(s)).toEqual({ entries: 32, mapped: 30, optout: 1, invalid: 1 });
  });

  it('a writing store leaves no -wal behind when it closes; checkpoint() empties it on demand', () => {
    const path = t.file();
    const s = t.open(path);
    s.commitBatch([{ type: 'email', hash: b64('w'), outcome: { kind: 'invalid' } }], 1);
    expect(statSync(`${path}-wal`).size).toBeGreaterThan(0);
    s.checkpoint();
    expect(statSync(`${path}-wal`).size).toBe(0);
    s.commitBatch([{ type: 'email', hash: b64('w2'), outcome: { kind: 'invalid' } }], 1);
    expect(statSync(`${path}-wal`).size).toBeGreaterThan(0);
    s.close();
    expect(!existsSync(`${path}-wal`) || statSync(`${path}-wal`).size === 0).toBe(true);
    const r = t.open(path, { readonly: true });
    expect(countsOf(r).entries).toBe(2);
    expect(() => r.checkpoint()).toThrow(/read-only/);
  });
});

describe('waitForLock', () => {
  it('waits for the holder to release the lock, then takes it', async () => {
    const path = t.file();
    const holder = t.open(path);
    holder.lock();
    const waiter = t.open(path);
    let released = false;
    setTimeout(() => {
      released = true;
      holder.close();
    }, 150);
    await waiter.waitForLock(5_000);
    expect(waiter.locked).toBe(true);
    // it took the lock only once the holder had let it go
    expect(released).toBe(true);
  });

  it('gives up after waitMs with the same error as lock()', async () => {
    const path = t.file();
    t.open(path).lock();
    const waiter = t.open(path);
    await expect(waiter.waitForLock(200)).rejects.toBeInstanceOf(StateLockedError);
    await expect(waiter.waitForLock(0)).rejects.toThrow(/is using .*; wait for it or remove/);
    expect(waiter.locked).toBe(false);
  });
});
