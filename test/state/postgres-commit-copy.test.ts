import { describe, expect, it } from 'vitest';
import type { StateRecord } from '../../src/state/backend.js';
import { openPostgresState } from '../../src/state/postgres/open.js';
import type { EntryUpdate } from '../../src/state/types.js';
import { usePostgres } from '../helpers/postgres.js';
import { b64 } from './tmp-state.js';

const ENV = 'http://127.0.0.1:1/|uid2';
const pg = usePostgres();

const mapped = (hash: string, u: string, r: number): EntryUpdate => ({
  type: 'email',
  hash,
  outcome: { kind: 'mapped', u, p: null, r, bucketId: 'b1' },
});

/** Every record of a state and the last id given: a COPY the server refused still used up its rows' ids. */
async function everything(s: Awaited<ReturnType<typeof openPostgresState>>) {
  const records: StateRecord[] = [];
  let last = 0;
  for (;;) {
    const page = await s.readRecords(last, 1_000);
    if (page.records.length === 0) return { records, last };
    records.push(...page.records);
    last = page.last;
  }
}

describe('PostgreSQL state: new entries committed as a COPY', () => {
  it('upserts a batch whose COPY a stored key refuses, at its first row or its last, and loses no answer', async () => {
    const s = await openPostgresState(pg.schemaUrl(), { envFingerprint: ENV });
    try {
      // more rows than a chunk of the COPY, so that a refusal can come while rows are sent or after their end
      const keys = (label: string) => Array.from({ length: 1_200 }, (_, i) => b64(`${label}-${i}`));
      const expected = new Map<string, string>();
      const commit = async (hashes: readonly string[], tag: string) => {
        await s.commitBatch(
          hashes.map((h) => mapped(h, b64(`${tag}-${h}`), 1_000)),
          50,
        );
        for (const h of hashes) expected.set(h, b64(`${tag}-${h}`));
      };
      const first = keys('a');
      await commit(first, 'a');
      expect((await everything(s)).last).toBe(first.length);
      const sorted = [...first].sort();
      // the stored key that sorts last, after new keys that sort before it: refused after the rows' end
      const lastKey = sorted.at(-1) as string;
      const b = keys('b').filter((h) => h < lastKey);
      await commit([...b, lastKey], 'b');
      const afterLast = await everything(s);
      expect(afterLast.records).toHaveLength(1_200 + b.length);
      // ids used up by rows not kept: the one stored key that the upsert sent, and those of the refused COPY
      expect(afterLast.last - 1_200 - b.length).toBeGreaterThan(1);
      // a batch all new (upserted, as a refusal came before it), then one whose first key is stored: refused there
      await commit(keys('c'), 'c');
      const before = await everything(s);
      const firstKey = sorted[0];
      const d = keys('d').filter((h) => h > firstKey);
      await commit([firstKey, ...d], 'd');
      const afterFirst = await everything(s);
      expect(afterFirst.records).toHaveLength(before.records.length + d.length);
      expect(afterFirst.last - before.last - d.length).toBeGreaterThan(1);
      // every key once, with its last answer
      const got = new Map(afterFirst.records.map((r) => [r.hash, r.u]));
      expect(got.size).toBe(expected.size);
      expect(got).toEqual(expected);
      for (const h of [...b, ...d]) expect(await s.lookupStored('email', [h])).toMatchObject({ u: [expected.get(h)] });
    } finally {
      await s.close();
    }
  });
});
