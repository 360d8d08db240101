import { describe, expect, it } from 'vitest';
import { BucketAnswer } from '../../src/pipeline/map/bucket-answer.js';
import { resultByteColumns } from '../../src/pipeline/map/result-bytes.js';
import { outputRows, outputRowsV2, type SentHashes } from '../../src/pipeline/map/result-columns.js';
import { RowChunk, SLOT } from '../../src/pipeline/map/row-chunk.js';
import { packAnswers, unpackAnswers } from '../../src/pipeline/threads/slot-answers.js';
import { utf8ColumnsRowBlock, utf8RowBlock } from '../../src/pipeline/io/row-blocks.js';
import type { TimeFormat } from '../../src/pipeline/io/typed-cells.js';

const WIDTH = 3;
const ROWS = 40;
const TIMES = [
  1_800_000_000,
  1_800_000_000,
  1_800_000_000,
  0,
  -0,
  -1,
  3_000_000_000,
  -2_147_483_648,
  2_147_483_647,
  1_700_000_123.75,
  2e15,
  -4e20,
  1e21,
  Number.NaN,
  Number.POSITIVE_INFINITY,
];
const REASONS = ['invalid email', 'the service answered 500 — übel', 'not sent: the run stopped first', ''];

/** A chunk of every kind of slot: mapped with and without p, at odd times, and each status with its reasons. */
function answeredChunk(v2: boolean): { chunk: RowChunk; sent: SentHashes } {
  const chunk = new RowChunk([], WIDTH, { thread: 0, piece: 0 }, ROWS);
  const sentStatus = new Uint8Array(ROWS * WIDTH);
  const phone = new Uint8Array(ROWS * WIDTH);
  const hashes: string[] = [];
  let mapped = 0;
  for (let slot = 0; slot < ROWS * WIDTH; slot++) {
    const kind = (slot * 7) % 6;
    if (kind === SLOT.missing) {
      chunk.setUnmapped(slot, SLOT.missing, 'empty');
      sentStatus[slot] = SLOT.missing;
      continue;
    }
    if (kind === SLOT.invalid) {
      chunk.setUnmapped(slot, SLOT.invalid, REASONS[slot % REASONS.length]);
      sentStatus[slot] = SLOT.invalid;
      continue;
    }
    sentStatus[slot] = SLOT.pending;
    phone[slot] = slot % 2;
    hashes.push(`h${slot}`.padEnd(44, 'A'));
    if (kind === SLOT.optout) chunk.setUnmapped(slot, SLOT.optout, 'optout');
    else if (kind === SLOT.error) chunk.setUnmapped(slot, SLOT.error, REASONS[(slot + 1) % REASONS.length]);
    else if (v2 && slot % 5 !== 0)
      chunk.setMapped(slot, new BucketAnswer(`u${slot}`, slot % 4 === 0 ? '' : `b${slot}`));
    else
      chunk.setMapped(slot, {
        u: `u${slot}`.padEnd(44, '='),
        p: slot % 3 === 0 ? null : slot % 4 === 0 ? '' : `p${slot}`,
        r: TIMES[mapped++ % TIMES.length],
      });
  }
  return { chunk, sent: { status: sentStatus, phone, hashes: Buffer.from(hashes.join(''), 'latin1') } };
}

describe('result columns written as bytes from the packed answers', () => {
  for (const v2 of [false, true])
    for (const hashes of ['none', 'base64', 'hex'] as const)
      for (const timeFormat of ['unix', 'iso'] as TimeFormat[])
        it(`make the block that the rows of outputRows make (${v2 ? 'v2' : 'v3'}, emitted hashes ${hashes}, ${timeFormat})`, () => {
          const { chunk, sent } = answeredChunk(v2);
          const answers = packAnswers(chunk);
          const emitHash = hashes !== 'none';
          const hashEncoding = hashes === 'hex' ? ('hex' as const) : undefined;
          const layout = { keep: [], prefixes: ['', '', ''], emitHash, hashEncoding, timeFormat };
          const rows = Array.from({ length: ROWS }, (_, line) => ({ line, cells: [] as string[] }));
          const answered = {
            rows,
            width: WIDTH,
            status: chunk.status,
            mapped: unpackAnswers(answers),
            reason: chunk.reason,
            sent,
          };
          const strings = (v2 ? outputRowsV2 : outputRows)(answered, null, layout);
          if (hashes === 'hex') expect(strings.flat().some((cell) => /^[0-9a-f]{64,66}$/.test(cell))).toBe(true);
          const columns = resultByteColumns(answers, { rowCount: ROWS, width: WIDTH, v2, layout, sent });
          expect(columns).toBeDefined();
          const width = strings[0].length;
          expect(columns?.length).toBe(width);
          const block = Buffer.from(utf8ColumnsRowBlock(ROWS, columns ?? [], [], 0));
          expect(block.equals(Buffer.from(utf8RowBlock(strings, width)))).toBe(true);
        });

  it('leaves answers whose raw UIDs are not ASCII to the rows of strings', () => {
    const chunk = new RowChunk([], 1, undefined, 1);
    chunk.setMapped(0, { u: 'ü', p: null, r: 1 });
    const layout = { emitHash: false, timeFormat: 'unix' as const };
    expect(resultByteColumns(packAnswers(chunk), { rowCount: 1, width: 1, v2: false, layout })).toBeUndefined();
  });

  it('refuses answers that do not cover the rows', () => {
    const chunk = new RowChunk([], 1, undefined, 2);
    chunk.setUnmapped(0, SLOT.missing, 'empty');
    chunk.setUnmapped(1, SLOT.missing, 'empty');
    const layout = { emitHash: false, timeFormat: 'unix' as const };
    expect(() => resultByteColumns(packAnswers(chunk), { rowCount: 3, width: 1, v2: false, layout })).toThrow(/cover/);
  });
});
