import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BucketAnswer, bucketIdOf } from '../../src/pipeline/map/bucket-answer.js';
import { outputRows, outputRowsV2 } from '../../src/pipeline/map/result-columns.js';
import { RowChunk, SLOT } from '../../src/pipeline/map/row-chunk.js';
import { packAnswers, unpackAnswers, unpackReasons } from '../../src/pipeline/threads/row-threads.js';
import { openSink } from '../../src/pipeline/io/output/sink.js';
import { tempDir } from '../helpers/map-e2e-data.js';

const U = (n: number) => `u${String(n).padStart(42, '0')}=`;
const P = (n: number) => `p${String(n).padStart(42, '0')}=`;

/** A stored answer is an instance of a class, not a plain object: packing must read it the same way. */
class Stored {
  constructor(
    readonly u: string,
    readonly p: string | null,
    readonly r: number,
  ) {}
}

function answeredChunk(): RowChunk {
  const chunk = new RowChunk([], 2, { thread: 0, piece: 0 }, 4);
  chunk.setMapped(0, { u: U(0), p: P(0), r: 1_800_000_000 });
  chunk.setUnmapped(1, SLOT.missing, 'empty');
  chunk.setMapped(2, new Stored(U(2), null, 1_700_000_123));
  chunk.setUnmapped(3, SLOT.optout, 'optout');
  chunk.setUnmapped(4, SLOT.invalid, 'invalid phone: must be + and 10 to 15 digits (E.164, no spaces or punctuation)');
  chunk.setMapped(5, { u: 'short', p: '', r: 0 });
  chunk.setUnmapped(6, SLOT.error, 'the service answered 500');
  chunk.setMapped(7, { u: U(7), p: P(7), r: 1_900_000_000 });
  return chunk;
}

describe('answers packed for the thread that holds the rows', () => {
  it('unpack(pack(chunk)) gives the same statuses, answers and reasons, so the output cells are the same', () => {
    const chunk = answeredChunk();
    const packed = packAnswers(chunk);
    const mapped = unpackAnswers(packed);
    expect(mapped.map((m) => (m === null ? null : { u: m.u, p: m.p, r: m.r }))).toEqual(
      chunk.mapped.map((m) => (m === null ? null : { u: m.u, p: m.p, r: m.r })),
    );
    expect([...packed.status]).toEqual([...chunk.status]);
    expect(unpackReasons(packed)).toEqual(chunk.reason);
    // each distinct reason crosses once
    expect(packed.reasonTexts).toEqual([...new Set(chunk.reason.filter((r) => r !== null))]);
    const rows = () => Array.from({ length: 4 }, (_, i) => ({ line: i + 2, cells: [`row${i}`] }));
    const direct = outputRows(
      { rows: rows(), width: 2, status: chunk.status, mapped: chunk.mapped, reason: chunk.reason },
      [],
    );
    const viaPack = outputRows(
      { rows: rows(), width: 2, status: packed.status, mapped, reason: unpackReasons(packed) },
      [],
    );
    expect(viaPack).toEqual(direct);
    // an empty p is kept apart from a missing one
    expect(mapped[5]?.p).toBe('');
    expect(mapped[2]?.p).toBeNull();
  });

  it('the statuses are a copy: the chunk keeps its own after the packed ones are handed over', () => {
    const chunk = answeredChunk();
    const packed = packAnswers(chunk);
    packed.status.fill(0);
    expect(chunk.status[0]).toBe(SLOT.mapped);
  });

  it('v2 answers come back as BucketAnswers, so the output has their salt buckets', () => {
    const chunk = new RowChunk([], 1, { thread: 0, piece: 1 }, 3);
    chunk.setMapped(0, new BucketAnswer(U(1), 'FCgKEc4KCb'));
    chunk.setUnmapped(1, SLOT.invalid, 'invalid email');
    chunk.setMapped(2, new BucketAnswer(U(3), 'c0iKwW5P2x', true));
    const packed = packAnswers(chunk);
    const mapped = unpackAnswers(packed);
    expect(mapped.map((m) => bucketIdOf(m))).toEqual(['FCgKEc4KCb', null, 'c0iKwW5P2x']);
    const rows = () => Array.from({ length: 3 }, () => ({ line: 1, cells: ['x'] }));
    expect(
      outputRowsV2({ rows: rows(), width: 1, status: packed.status, mapped, reason: unpackReasons(packed) }, null),
    ).toEqual(
      outputRowsV2({ rows: rows(), width: 1, status: chunk.status, mapped: chunk.mapped, reason: chunk.reason }, null),
    );
  });
});

describe('encoded output handed to the sink', () => {
  const dir = tempDir('uid2-row-answers-');
  afterAll(() => dir.remove());

  it('is written as it is, and its memory is let go once written', async () => {
    const path = join(dir.path, 'out.csv');
    const sink = await openSink({ path, format: 'csv', header: ['a', 'b'] });
    const first = new TextEncoder().encode('1,x\n2,y\n');
    const second = new TextEncoder().encode('3,"z,w"\n');
    await sink.writeEncoded(first);
    await sink.writeEncoded(second);
    await sink.commit();
    expect(readFileSync(path, 'utf8')).toBe('a,b\n1,x\n2,y\n3,"z,w"\n');
    // moved out (detached) after the write: nothing here keeps the bytes alive any more
    expect(first.byteLength).toBe(0);
    expect(second.byteLength).toBe(0);
  });
});
