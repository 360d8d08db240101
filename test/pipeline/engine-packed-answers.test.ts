// Answers read packed (ScannedAnswers) give the engine's output, counts and state exactly what answer objects give.
import { describe, expect, it } from 'vitest';
import { sha256Base64 } from '../../src/identity/index.js';
import { MapEngine, type EngineColumn, type MapEngineOptions } from '../../src/pipeline/map/map-engine.js';
import { outputRows } from '../../src/pipeline/map/result-columns.js';
import { packAnswers, unpackAnswers } from '../../src/pipeline/threads/slot-answers.js';
import { chunked, FakeMapper, FakeState, NOW_S, rawUidOf, seeded } from './engine-fakes.js';

const COLUMNS: EngineColumn[] = [
  { name: 'email', index: 1, kind: 'email' },
  { name: 'phone', index: 2, kind: 'phone' },
];

/** Rows whose identifiers repeat near and far (past what a small table remembers), with opt-outs and gaps. */
function rows(n: number): string[][] {
  const random = seeded(11);
  return Array.from({ length: n }, (_, i) => {
    const far = Math.floor(random() * 4_000);
    const email = i % 29 === 0 ? 'optout@example.com' : `user${random() < 0.4 ? far : i}@example.com`;
    const phone = i % 7 === 0 ? '' : `+1555${String(1_000_000 + (random() < 0.5 ? far : i))}`;
    return [String(i), email, phone];
  });
}

async function run(input: string[][], options: Partial<MapEngineOptions> & { packed: boolean }) {
  const random = seeded(5);
  const mapper = new FakeMapper({ packed: options.packed, latency: () => Math.floor(random() * 6) });
  const out: string[][] = [];
  const rejects: string[][] = [];
  // what a row thread is handed: the chunk's answers packed for it and read back there
  const handedOver: string[] = [];
  const held: string[] = [];
  const text = (m: { u: string; p: string | null; r: number } | null) => (m === null ? '' : `${m.u} ${m.p} ${m.r}`);
  const engine = new MapEngine({
    columns: COLUMNS,
    mapBatch: mapper.mapBatch,
    nowS: () => NOW_S,
    batchSize: 200,
    concurrency: 6,
    recentCapacity: 300,
    ...options,
    onChunk: (chunk) => {
      out.push(...outputRows(chunk, rejects));
      for (const m of unpackAnswers(packAnswers(chunk))) handedOver.push(text(m));
      for (const m of chunk.mapped) held.push(text(m));
    },
  });
  const result = await engine.run(chunked(input, 64));
  return { result, out, rejects, handedOver, held, mapper };
}

const byKey = (a: { type: string; hash: string }, b: { type: string; hash: string }): number =>
  `${a.type}:${a.hash}` < `${b.type}:${b.hash}` ? -1 : 1;

describe('MapEngine with packed answers', () => {
  it('writes, hands over and counts what answer objects give, with repeats the table forgot or moved up', async () => {
    const input = rows(6_000);
    const objects = await run(input, { packed: false });
    const packed = await run(input, { packed: true });
    // how many repeats found their identifier still remembered depends on when answers came: the rest does not
    expect(packed.result.outcome).toEqual({ kind: 'completed' });
    expect(packed.result.counts.status).toEqual(objects.result.counts.status);
    expect(packed.result.counts.valid).toBe(objects.result.counts.valid);
    expect(packed.out).toEqual(objects.out);
    expect(packed.rejects).toEqual(objects.rejects);
    expect(packed.handedOver).toEqual(objects.handedOver);
    expect(packed.handedOver).toEqual(packed.held);
    expect(objects.handedOver).toEqual(objects.held);
    // the table forgot some identifiers, so repeats were both served from it and sent again
    expect(packed.result.counts.uniqueEstimated).toBe(true);
    expect(packed.result.counts.deduplicated).toBeGreaterThan(500);
    expect(packed.result.counts.status.optout).toBe(Math.ceil(6_000 / 29));
    const row = packed.out[1];
    expect(row[3]).toBe(rawUidOf('email', sha256Base64(input[1][1])));
  });

  it('commits to the state what answer objects commit', async () => {
    const input = rows(2_000);
    const stateOf = async (packed: boolean) => {
      const state = new FakeState();
      const { out } = await run(input, { packed, state });
      return { out, entries: [...state.entries.values()].map(({ id: _, ...entry }) => entry).sort(byKey) };
    };
    const objects = await stateOf(false);
    const packed = await stateOf(true);
    expect(packed.entries.length).toBeGreaterThan(2_000);
    expect(packed.entries).toEqual(objects.entries);
    expect(packed.out).toEqual(objects.out);
  });
});
