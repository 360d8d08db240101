import { describe, expect, it } from 'vitest';
import { AdaptiveConcurrency } from '../../src/pipeline/run/adaptive-limiter.js';
import { MapEngine } from '../../src/pipeline/map/map-engine.js';
import { DistinctEstimate } from '../../src/pipeline/map/distinct-count.js';
import { IdentifierTable, textWords } from '../../src/pipeline/map/identifier-table.js';
import { RowChunk } from '../../src/pipeline/map/row-chunk.js';
import { sha256Base64 } from '../../src/identity/index.js';
import { chunked, FakeMapper, seeded } from './engine-fakes.js';

/** The table's lookup and add with a hash given as text: the table reads a hash as its words (hashWords). */
function find(table: IdentifierTable, type: 'email' | 'phone', hash: string): number {
  return table.find(type, textWords(hash), 0);
}
function add(table: IdentifierTable, type: 'email' | 'phone', hash: string, chunk: RowChunk, slot: number): number {
  return table.add(type, textWords(hash), 0, chunk, slot);
}

function emails(n: number): string[][] {
  return Array.from({ length: n }, (_, i) => [String(i), `user${i}@example.com`]);
}

describe('AdaptiveConcurrency', () => {
  it('halves on 429 once per cooldown, never below the floor, and climbs back one step per few successes', () => {
    let t = 0;
    const limiter = new AdaptiveConcurrency({ max: 20, raiseEvery: 3, cooldownMs: 1_000, now: () => t });
    limiter.onRetry({ httpStatus: 429 });
    expect(limiter.concurrency).toBe(10);
    limiter.onRetry({ httpStatus: 429 });
    expect(limiter.concurrency).toBe(10);
    limiter.onRetry({ httpStatus: 503 });
    expect(limiter.concurrency).toBe(10);
    for (const step of [5, 2, 1, 1]) {
      t += 1_000;
      limiter.rateLimited();
      expect(limiter.concurrency).toBe(step);
    }
    for (let i = 0; i < 6; i++) limiter.succeeded();
    expect(limiter.concurrency).toBe(3);
    // a 429 resets the run of successes
    limiter.succeeded();
    limiter.succeeded();
    t += 1_000;
    limiter.rateLimited();
    limiter.succeeded();
    expect(limiter.concurrency).toBe(1);
    for (let i = 0; i < 200; i++) limiter.succeeded();
    expect(limiter.concurrency).toBe(20);
  });

  it('refuses a level below 1', () => {
    expect(() => new AdaptiveConcurrency({ max: 0 })).toThrow(/at least 1/);
  });
});

describe('MapEngine dispatch', () => {
  it('never has more requests in flight than the limit, and lowers the level on 429', async () => {
    const random = seeded(3);
    let t = 0;
    const limiter = new AdaptiveConcurrency({ max: 6, raiseEvery: 1_000, cooldownMs: 0, now: () => t });
    const levels: number[] = [];
    let overLimit = 0;
    const mapper = new FakeMapper({
      latency: () => 1 + Math.floor(random() * 6),
      onStart: (inFlight, call) => {
        if (inFlight > limiter.concurrency) overLimit++;
        // the client reports a 429 (and retries it) on calls 10 and 30
        if (call === 10 || call === 30) {
          t += 1;
          limiter.onRetry({ httpStatus: 429 });
          levels.push(limiter.concurrency);
        }
      },
    });
    const engine = new MapEngine({
      columns: [{ name: 'email', index: 1, kind: 'email' }],
      mapBatch: mapper.mapBatch,
      limiter,
      batchSize: 20,
    });
    const result = await engine.run(chunked(emails(2_000), 50));
    expect(result.outcome.kind).toBe('completed');
    expect(levels).toEqual([3, 1]);
    expect(mapper.peakInFlight).toBe(6);
    expect(limiter.peakInFlight).toBe(6);
    // a call never starts while as many as the current level are running, even right after a drop
    expect(overLimit).toBe(0);
    expect(mapper.itemsSent).toBe(2_000);
  });

  it('stops reading while too many rows wait, so memory stays bounded', async () => {
    let maxRead = 0;
    const mapper = new FakeMapper({ latency: () => 3 });
    const engine = new MapEngine({
      columns: [{ name: 'email', index: 1, kind: 'email' }],
      mapBatch: mapper.mapBatch,
      batchSize: 50,
      concurrency: 2,
      maxPendingRows: 300,
      onChunk: () => {
        maxRead = Math.max(maxRead, engine.counts.rowsRead - engine.counts.rowsDone);
      },
    });
    const result = await engine.run(chunked(emails(5_000), 25));
    expect(result.counts.rowsDone).toBe(5_000);
    // the window may pass its bound by at most one chunk before reading pauses
    expect(maxRead).toBeLessThanOrEqual(300 + 25);
  });
});

describe('counting distinct identifiers', () => {
  it('estimates within 2% in fixed memory', () => {
    const estimate = new DistinctEstimate();
    for (let i = 0; i < 300_000; i++)
      estimate.add((i % 200_000) % 3 ? 'email' : 'phone', Buffer.from(sha256Base64(String(i % 200_000)), 'latin1'), 0);
    expect(Math.abs(estimate.count - 200_000) / 200_000).toBeLessThan(0.02);
  });

  it('is exact while the engine remembers every identifier, and an estimate once it forgot some', async () => {
    const rows = Array.from({ length: 3_000 }, (_, i) => [String(i), `user${i % 1_000}@example.com`]);
    const columns = [{ name: 'email', index: 1, kind: 'email' as const }];
    const exact = await new MapEngine({ columns, mapBatch: new FakeMapper().mapBatch }).run(chunked(rows, 100));
    expect(exact.counts).toMatchObject({ uniqueIdentifiers: 1_000, uniqueEstimated: false, deduplicated: 2_000 });

    const forgetful = new FakeMapper();
    // small batches, answered while the file is read: answered identifiers are forgotten
    const small = await new MapEngine({
      columns,
      mapBatch: forgetful.mapBatch,
      recentCapacity: 200,
      batchSize: 50,
    }).run(chunked(rows, 100));
    expect(small.counts.uniqueEstimated).toBe(true);
    expect(Math.abs(small.counts.uniqueIdentifiers - 1_000)).toBeLessThan(30);
    // the repeats it forgot were sent again, and counted
    expect(forgetful.itemsSent).toBeGreaterThan(1_000);
    expect(small.counts.repeatsEstimated).toBe(true);
    expect(Math.abs(small.counts.repeatsSent - (forgetful.itemsSent - 1_000))).toBeLessThan(30);
  });
});

describe('IdentifierTable', () => {
  const chunk = new RowChunk([{ line: 1, cells: [] }], 1);
  it('tells apart hashes that share their first characters, and forgets in whole generations', () => {
    const table = new IdentifierTable(8);
    // same 30-bit key (first 5 characters), different hashes
    const aHash = `AAAAA${'a'.repeat(38)}=`;
    const bHash = `AAAAA${'b'.repeat(38)}=`;
    const a = add(table, 'email', aHash, chunk, 0);
    const b = add(table, 'email', bHash, chunk, 0);
    expect(find(table, 'email', aHash)).toBe(a);
    expect(find(table, 'email', bHash)).toBe(b);
    expect(find(table, 'phone', aHash)).toBe(-1);
    expect(find(table, 'email', `AAAAA${'c'.repeat(38)}=`)).toBe(-1);
    // fill two more generations of 4: a and b, answered, are forgotten unless used
    const answer = { u: sha256Base64('u'), p: null, r: 1_800_000_000 };
    table.resolve(a, answer);
    table.resolve(b, answer);
    const keepHash = sha256Base64('keep');
    const keep = add(table, 'phone', keepHash, chunk, 0);
    for (let i = 0; i < 10; i++) {
      add(table, 'email', sha256Base64(String(i)), chunk, 0);
      expect(find(table, 'phone', keepHash)).toBe(keep);
    }
    expect(find(table, 'email', aHash)).toBe(-1);
    expect(table.dropped).toBe(true);
    expect(table.size).toBeLessThanOrEqual(8);
  });

  it('never forgets an identifier still waiting for its answer, and lets it go once answered or failed', () => {
    const table = new IdentifierTable(8);
    const hashes = Array.from({ length: 12 }, (_, i) => sha256Base64(`waiting${i}`));
    const waiting = hashes.map((hash) => add(table, 'email', hash, chunk, 0));
    for (let i = 0; i < 40; i++) add(table, 'phone', sha256Base64(String(i)), chunk, 0);
    for (let i = 0; i < 40; i++) {
      const id = find(table, 'phone', sha256Base64(String(i)));
      if (id >= 0) table.fail(id, 'x');
    }
    expect(table.dropped).toBe(true);
    // more waiting identifiers than a generation holds, all still found
    expect(hashes.map((hash) => find(table, 'email', hash))).toEqual(waiting);
    table.resolve(waiting[0], { u: sha256Base64('u'), p: null, r: 1_800_000_000 });
    table.fail(waiting[1], 'not sent');
    for (let i = 40; i < 80; i++) add(table, 'phone', sha256Base64(String(i)), chunk, 0);
    expect(find(table, 'email', hashes[0])).toBe(-1);
    expect(find(table, 'email', hashes[1])).toBe(-1);
    expect(hashes.slice(2).map((hash) => find(table, 'email', hash))).toEqual(waiting.slice(2));
  });

  it('finds every identifier of the young generation across many rotations, by type', () => {
    const table = new IdentifierTable(1_000);
    const added: { type: 'email' | 'phone'; hash: string; id: number }[] = [];
    for (let i = 0; i < 5_250; i++) {
      const hash = sha256Base64(`id${i}`);
      const type = i % 2 === 0 ? 'email' : 'phone';
      const id = add(table, type, hash, chunk, 0);
      // answered at once: only answered identifiers are ever forgotten
      table.resolve(id, { u: hash, p: null, r: 1_800_000_000 });
      added.push({ type, hash, id });
      // the same hash of the other type is another identifier
      expect(find(table, type === 'email' ? 'phone' : 'email', hash)).toBe(-1);
    }
    // an identifier whose request failed waits again for a new one, in the same place
    const last = added[added.length - 1];
    table.fail(last.id, 'x');
    const before = table.size;
    table.retry(last.id, chunk, 0);
    expect(table.isWaiting(last.id)).toBe(true);
    expect(find(table, last.type, last.hash)).toBe(last.id);
    expect(table.size).toBe(before);
    // generations of 500: the last 250 are young, the 500 before them old; newest first, so that moving the old
    // ones up does not drop the rest before they are looked up
    for (const item of added.slice(-500).reverse()) expect(find(table, item.type, item.hash)).toBe(item.id);
    expect(find(table, 'email', added[0].hash)).toBe(-1);
    expect(table.dropped).toBe(true);
    expect(table.size).toBeLessThanOrEqual(1_000);
  });

  it('grows past its first room when many identifiers wait at once, and finds them all', () => {
    const table = new IdentifierTable(8);
    const hashes = Array.from({ length: 3_000 }, (_, i) => sha256Base64(`many${i}`));
    const ids = hashes.map((hash, i) => add(table, i % 3 === 0 ? 'phone' : 'email', hash, chunk, 0));
    expect(new Set(ids).size).toBe(ids.length);
    expect(hashes.map((hash, i) => find(table, i % 3 === 0 ? 'phone' : 'email', hash))).toEqual(ids);
    // once answered they are let go, and their ids are used again
    for (const id of ids) table.resolve(id, { e: 'optout' });
    for (let i = 0; i < 20; i++) add(table, 'email', sha256Base64(`after${i}`), chunk, 0);
    expect(hashes.filter((hash, i) => find(table, i % 3 === 0 ? 'phone' : 'email', hash) >= 0)).toEqual([]);
    const reused = add(table, 'email', sha256Base64('reused'), chunk, 0);
    expect(reused).toBeLessThan(3_000);
  });
});
