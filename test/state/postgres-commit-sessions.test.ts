import postgres from 'postgres';
import { describe, expect, it } from 'vitest';
import { openPostgresState } from '../../src/state/postgres/open.js';
import type { EntryUpdate } from '../../src/state/types.js';
import { usePostgres } from '../helpers/postgres.js';

const ENV = 'http://127.0.0.1:1/|uid2';
const pg = usePostgres();

const mapped = (hash: string, u: string): EntryUpdate => ({
  type: 'email',
  hash,
  outcome: { kind: 'mapped', u, p: null, r: 1_000, bucketId: 'b1' },
});

/** Whether `p` settles within `ms`. */
const settlesWithin = (p: Promise<unknown>, ms: number): Promise<boolean> =>
  Promise.race([p.then(() => true), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), ms))]);

describe('PostgreSQL state: commits of answered batches side by side', () => {
  it('commits a batch while an earlier one waits for a row lock, and both keep their answers', async () => {
    const schema = `commit_sessions_${process.pid}`;
    const s = await openPostgresState(pg.schemaUrl(schema), { envFingerprint: ENV });
    const other = postgres(pg.server().url, { max: 1, onnotice: () => {} });
    try {
      await s.commitBatch([mapped('h1', 'u1')], 50);
      // another session holds the stored entry's row: a commit that writes it waits until that session ends
      const holder = await other.reserve();
      await holder.unsafe('BEGIN');
      await holder.unsafe(`SELECT id FROM ${schema}.entries FOR UPDATE`);
      const waiting = s.commitBatch([mapped('h1', 'u1-again')], 60);
      expect(await settlesWithin(waiting, 500)).toBe(false);
      // a batch of other keys answered meanwhile is not held behind it
      expect(await settlesWithin(s.commitBatch([mapped('h2', 'u2')], 60), 5_000)).toBe(true);
      await holder.unsafe('COMMIT');
      holder.release();
      await waiting;
      const got = await s.lookupStored('email', ['h1', 'h2']);
      expect(new Map([...got.at].map((at, i) => [at, got.u[i]]))).toEqual(
        new Map([
          [0, 'u1-again'],
          [1, 'u2'],
        ]),
      );
    } finally {
      await other.end();
      await s.close();
    }
  });
});
