import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MessageChannel, receiveMessageOnPort } from 'node:worker_threads';
import { afterAll, describe, expect, it } from 'vitest';
import { BucketAnswer, bucketIdOf } from '../../src/pipeline/map/bucket-answer.js';
import { outputRows, outputRowsV2 } from '../../src/pipeline/map/result-columns.js';
import { RowChunk, SLOT, unpackReasons } from '../../src/pipeline/map/row-chunk.js';
import {
  answerBuffers,
  packAnswers,
  type SlotAnswers,
  unpackAnswers,
} from '../../src/pipeline/threads/slot-answers.js';
import { ScannedAnswers } from '../../src/protocol/index.js';
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

  it('hands the raw UIDs over as bytes in one buffer, from packed answers and answer objects alike', () => {
    // a batch's answer bytes, read packed: item 0 has a p, item 1 none
    const json = Buffer.from(`{"u":"${U(10)}","p":"${P(10)}"},{"u":"${U(11)}","p":null}`, 'latin1');
    const scanned = new ScannedAnswers(json, 2);
    scanned.addMapped(json.indexOf(U(10)), json.indexOf(P(10)), 1_800_000_010);
    scanned.addMapped(json.indexOf(U(11)), null, 1_800_000_011);
    const chunk = new RowChunk([], 2, { thread: 0, piece: 2 }, 3);
    chunk.setScanned(0, scanned, 1);
    chunk.setMapped(1, { u: U(1), p: P(1), r: 1_700_000_001 });
    chunk.setUnmapped(2, SLOT.missing, 'empty');
    chunk.setScanned(3, scanned, 0);
    chunk.setScanned(4, scanned, 1);
    chunk.setMapped(5, new Stored(U(5), null, 1_700_000_005));
    const packed = packAnswers(chunk);
    const shared = packed.u[0].buffer;
    for (const bytes of [...packed.u, ...packed.p]) expect(bytes.buffer).toBe(shared);
    expect(Buffer.from(packed.u[0]).toString('latin1')).toBe(U(11) + U(11));
    expect(Buffer.from(packed.p[0]).toString('latin1')).toBe('');
    expect(Buffer.from(packed.u[1]).toString('latin1')).toBe(U(1) + U(10) + U(5));
    expect(Buffer.from(packed.p[1]).toString('latin1')).toBe(P(1) + P(10));
    const transfer = answerBuffers(packed);
    expect(transfer).toContain(shared);
    // handed over as a thread gets them: moved, not copied, and read back the same there
    const { port1, port2 } = new MessageChannel();
    port1.postMessage(packed, transfer);
    const got = receiveMessageOnPort(port2)?.message as SlotAnswers;
    port1.close();
    expect(shared.byteLength).toBe(0);
    const plain = (m: { u: string; p: string | null; r: number } | null) =>
      m === null ? null : { u: m.u, p: m.p, r: m.r };
    expect(unpackAnswers(got).map(plain)).toEqual(chunk.mapped.map(plain));
  });

  it('hands over every base64 character of packed raw UIDs bit for bit, wherever it lies in the answer', () => {
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
    // each character at each of the 44 places, and the answers at every offset modulo 8
    const uids = Array.from({ length: 64 }, (_, i) =>
      Array.from({ length: 44 }, (_, j) => (j === 43 && i % 2 === 0 ? '=' : alphabet[(i + 7 * j) % 64])).join(''),
    );
    const items = uids.map(
      (u, i) => `${' '.repeat(i % 8)}{"u":"${u}","p":${i % 3 === 0 ? 'null' : `"${uids[63 - i]}"`}}`,
    );
    const json = Buffer.from(items.join(','), 'latin1');
    const scanned = new ScannedAnswers(json, uids.length);
    let from = 0;
    for (let i = 0; i < uids.length; i++) {
      const uAt = json.indexOf(`"u":"${uids[i]}"`, from) + 5;
      const pAt = i % 3 === 0 ? null : json.indexOf(uids[63 - i], uAt + 44);
      scanned.addMapped(uAt, pAt, 1_800_000_000 + i);
      from = uAt + 44;
    }
    const chunk = new RowChunk([], 2, { thread: 0, piece: 5 }, 32);
    for (let slot = 0; slot < 64; slot++) chunk.setScanned(slot, scanned, 63 - slot);
    const mapped = unpackAnswers(packAnswers(chunk));
    expect(mapped.map((m) => (m === null ? null : [m.u, m.p, m.r]))).toEqual(
      Array.from({ length: 64 }, (_, slot) => {
        const i = 63 - slot;
        return [uids[i], i % 3 === 0 ? null : uids[63 - i], 1_800_000_000 + i];
      }),
    );
  });

  it('reads back raw UIDs that are not ASCII, or that UTF-8 cannot carry, as they were', () => {
    const chunk = new RowChunk([], 1, { thread: 0, piece: 3 }, 4);
    chunk.setMapped(0, { u: 'zürich', p: '\ud800x', r: 1 });
    chunk.setMapped(1, { u: 'a\udc00', p: null, r: 2 });
    chunk.setMapped(2, { u: U(2), p: '€', r: 3 });
    // longer than the room kept from chunk to chunk
    const long = '€'.repeat(40_000);
    chunk.setMapped(3, { u: long, p: U(3), r: 4 });
    const mapped = unpackAnswers(packAnswers(chunk));
    expect(mapped.map((m) => [m?.u, m?.p])).toEqual([
      ['zürich', '\ud800x'],
      ['a\udc00', null],
      [U(2), '€'],
      [long, U(3)],
    ]);
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
