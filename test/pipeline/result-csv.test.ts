import { describe, expect, it } from 'vitest';
import { fitRow } from '../../src/pipeline/io/csv/fit-row.js';
import { encodeCsvRow } from '../../src/pipeline/io/output/row-encoders.js';
import { encodeTsvRow } from '../../src/pipeline/io/output/tsv-encoder.js';
import type { TimeFormat } from '../../src/pipeline/io/typed-cells.js';
import { BucketAnswer } from '../../src/pipeline/map/bucket-answer.js';
import { outputRows, outputRowsV2, type SentHashes } from '../../src/pipeline/map/result-columns.js';
import { csvPieceBytes } from '../../src/pipeline/map/result-csv.js';
import { RowChunk, SLOT } from '../../src/pipeline/map/row-chunk.js';
import { packAnswers } from '../../src/pipeline/threads/slot-answers.js';

const WIDTH = 2;
const INPUT_WIDTH = 4;
const ROWS = 60;
const TIMES = [1_800_000_000, 1_800_000_000, 0, -1, 1_700_000_123.75, 2e15, 1e21, Number.NaN];
/** Reasons as a service or the tool writes them, some that CSV must quote. */
const REASONS = ['invalid phone: "+1 617", no spaces or punctuation', 'the service answered 500 — übel', 'a\r\nb', ''];

/** Input lines: plain, ragged (short, long, a trailing comma), non-ASCII, every line end, empty lines between. */
function pieceOf(rows: number): { piece: Buffer; lines: string[] } {
  const lines: string[] = [];
  let text = '';
  const ends = ['\n', '\r\n', '\r', '\n\n', '\r\n\r\n'];
  for (let r = 0; r < rows; r++) {
    const line =
      r % 11 === 3
        ? `id${r},short`
        : r % 13 === 5
          ? `id${r},a@b.c,+1,x,extra`
          : r % 7 === 6
            ? `id${r},a${r}@example.com,,Zoë,`
            : `id${r},user${r}@example.com,+1617555${r},${'w'.repeat(r)}`;
    lines.push(line);
    text += line + ends[r % ends.length];
  }
  return { piece: Buffer.from(text, 'utf8'), lines };
}

/** A chunk of every kind of slot: mapped with and without p, at odd times, and each status with its reasons. */
function answeredChunk(v2: boolean, rows: number, u = (slot: number) => `u${slot}`.padEnd(44, '=')) {
  const chunk = new RowChunk([], WIDTH, { thread: 0, piece: 0 }, rows);
  const sentStatus = new Uint8Array(rows * WIDTH);
  const phone = new Uint8Array(rows * WIDTH);
  const hashes: string[] = [];
  let mapped = 0;
  let reasons = 0;
  for (let slot = 0; slot < rows * WIDTH; slot++) {
    const kind = (slot * 7) % 6;
    if (kind === SLOT.missing || kind === SLOT.pending) {
      chunk.setUnmapped(slot, SLOT.missing, 'empty');
      sentStatus[slot] = SLOT.missing;
      continue;
    }
    if (kind === SLOT.invalid) {
      chunk.setUnmapped(slot, SLOT.invalid, REASONS[reasons++ % REASONS.length]);
      sentStatus[slot] = SLOT.invalid;
      continue;
    }
    sentStatus[slot] = SLOT.pending;
    phone[slot] = slot % 2;
    hashes.push(`h${slot}`.padEnd(44, 'A'));
    if (kind === SLOT.optout) chunk.setUnmapped(slot, SLOT.optout, 'optout');
    else if (kind === SLOT.error) chunk.setUnmapped(slot, SLOT.error, REASONS[reasons++ % REASONS.length]);
    else if (v2) chunk.setMapped(slot, new BucketAnswer(u(slot), slot % 4 === 0 ? '' : `b${slot}`));
    else
      chunk.setMapped(slot, {
        u: u(slot),
        p: slot % 3 === 0 ? null : slot % 4 === 0 ? '' : `p${slot}`,
        r: TIMES[mapped++ % TIMES.length],
      });
  }
  const sent: SentHashes = { status: sentStatus, phone, hashes: Buffer.from(hashes.join(''), 'latin1') };
  return { chunk, sent };
}

function fitLine(line: string): string {
  return encodeCsvRow(fitRow(0, line.split(','), INPUT_WIDTH, { shortRows: 0, longRows: 0, extraKeys: 0 }).cells).slice(
    0,
    -1,
  );
}

/** The plain path: each line's cells, fitted, and the result cells of outputRows, encoded row by row. */
function expected(
  lines: string[],
  chunk: RowChunk,
  sent: SentHashes,
  v2: boolean,
  layout: Parameters<typeof outputRows>[2],
  delimiter: ',' | '\t' = ',',
) {
  const counts = { shortRows: 0, longRows: 0, extraKeys: 0 };
  const rows = lines.map((line, r) => fitRow(r, line.split(delimiter), INPUT_WIDTH, counts));
  const rejects: string[][] = [];
  const answered = { rows, width: WIDTH, status: chunk.status, mapped: chunk.mapped, reason: chunk.reason, sent };
  const out = (v2 ? outputRowsV2 : outputRows)(answered, rejects, layout);
  const encode = delimiter === ',' ? encodeCsvRow : encodeTsvRow;
  return { bytes: out.map(encode).join(''), rejects: rejects.map(encode).join('') };
}

describe('a plain CSV piece written straight into bytes', () => {
  for (const v2 of [false, true])
    for (const emitHash of [false, true])
      for (const timeFormat of ['unix', 'iso'] as TimeFormat[])
        it(`is the bytes of encoding outputRows row by row (${v2 ? 'v2' : 'v3'}, --emit-hash ${emitHash}, ${timeFormat})`, () => {
          const { piece, lines } = pieceOf(ROWS);
          const { chunk, sent } = answeredChunk(v2, ROWS);
          const layout = { keep: null, prefixes: ['e_', 'p_'], emitHash, timeFormat };
          const want = expected(lines, chunk, sent, v2, layout);
          // the run is worth comparing: quoted reasons, mapped cells, rejected rows, a fitted line
          expect(want.bytes).toContain('"invalid phone: ""+1 617"", no spaces or punctuation"');
          expect(want.bytes).toMatch(/,mapped,/);
          expect(want.rejects.length).toBeGreaterThan(0);
          const got = csvPieceBytes(packAnswers(chunk), {
            piece,
            inputWidth: INPUT_WIDTH,
            width: WIDTH,
            v2,
            layout,
            sent,
            rejects: true,
            fitLine,
          });
          expect(got).toBeDefined();
          expect(Buffer.from(got?.bytes ?? []).toString('utf8')).toBe(want.bytes);
          expect(Buffer.from(got?.rejectBytes ?? []).toString('utf8')).toBe(want.rejects);
          // handed over whole: each from the start of its own buffer
          expect(got?.bytes.byteOffset).toBe(0);
          expect(got?.bytes.buffer.byteLength).toBeGreaterThanOrEqual(got?.bytes.byteLength ?? 0);
        });

  for (const keep of [[3, 0], [1], [0, 1, 2, 3]])
    it(`writes the --keep input cells in their order (${keep.join(',')}), ragged lines fitted first`, () => {
      const { piece, lines } = pieceOf(ROWS);
      const { chunk, sent } = answeredChunk(false, ROWS);
      const layout = { keep, prefixes: ['', 'p_'], emitHash: false, timeFormat: 'unix' as const };
      const want = expected(lines, chunk, sent, false, layout);
      expect(want.rejects.length).toBeGreaterThan(0);
      const input = { piece, inputWidth: INPUT_WIDTH, width: WIDTH, v2: false, layout, sent, rejects: true, fitLine };
      const got = csvPieceBytes(packAnswers(chunk), input);
      expect(Buffer.from(got?.bytes ?? []).toString('utf8')).toBe(want.bytes);
      expect(Buffer.from(got?.rejectBytes ?? []).toString('utf8')).toBe(want.rejects);
    });

  for (const [v2, emitHash, keep] of [
    [false, false, null],
    [false, true, null],
    [true, false, [3, 0]],
  ] as const)
    it(`writes TSV as the TSV encoder does (${v2 ? 'v2' : 'v3'}, --emit-hash ${emitHash}, --keep ${keep})`, () => {
      const { lines } = pieceOf(ROWS);
      const tsv = lines.map((line) => line.replaceAll(',', '\t'));
      const piece = Buffer.from(tsv.map((line, r) => line + (r % 3 === 0 ? '\r\n' : '\n')).join(''), 'utf8');
      const { chunk, sent } = answeredChunk(v2, ROWS);
      const layout = {
        keep: keep === null ? null : [...keep],
        prefixes: ['e_', ''],
        emitHash,
        timeFormat: 'iso' as const,
      };
      const want = expected(tsv, chunk, sent, v2, layout, '\t');
      // the run is worth comparing: a reason quoted for its quote but not for its comma, a ragged line
      expect(want.bytes).toContain('\t"invalid phone: ""+1 617"", no spaces or punctuation"');
      expect(want.bytes).toContain('\t"a\r\nb"');
      expect(want.rejects.length).toBeGreaterThan(0);
      const fitTsv = (line: string) =>
        encodeTsvRow(fitRow(0, line.split('\t'), INPUT_WIDTH, { shortRows: 0, longRows: 0, extraKeys: 0 }).cells).slice(
          0,
          -1,
        );
      const input = { piece, inputWidth: INPUT_WIDTH, width: WIDTH, v2, layout, sent, rejects: true, fitLine: fitTsv };
      const got = csvPieceBytes(packAnswers(chunk), { ...input, delimiter: '\t' });
      expect(Buffer.from(got?.bytes ?? []).toString('utf8')).toBe(want.bytes);
      expect(Buffer.from(got?.rejectBytes ?? []).toString('utf8')).toBe(want.rejects);
    });

  it('leaves a piece with no input column kept to the rows of strings', () => {
    const { piece } = pieceOf(ROWS);
    const { chunk, sent } = answeredChunk(false, ROWS);
    const layout = { keep: [], prefixes: ['', 'p_'], emitHash: false, timeFormat: 'unix' as const };
    const input = { piece, inputWidth: INPUT_WIDTH, width: WIDTH, v2: false, layout, sent, rejects: false, fitLine };
    expect(csvPieceBytes(packAnswers(chunk), input)).toBeUndefined();
  });

  it('writes into a given buffer when it is long enough, and into a new one when not', () => {
    const { piece, lines } = pieceOf(ROWS);
    const { chunk, sent } = answeredChunk(false, ROWS);
    const layout = { keep: null, prefixes: ['', 'p_'], emitHash: false, timeFormat: 'unix' as const };
    const want = expected(lines, chunk, sent, false, layout).bytes;
    const input = { piece, inputWidth: INPUT_WIDTH, width: WIDTH, v2: false, layout, sent, rejects: false, fitLine };
    const first = csvPieceBytes(packAnswers(chunk), input);
    const into = first?.bytes.buffer as ArrayBuffer;
    // what a buffer held before is overwritten, never left in the output
    new Uint8Array(into).fill(0x7a);
    const again = csvPieceBytes(packAnswers(chunk), { ...input, into });
    expect(again?.bytes.buffer).toBe(into);
    expect(Buffer.from(again?.bytes ?? []).toString('utf8')).toBe(want);
    const short = new ArrayBuffer(16);
    const fresh = csvPieceBytes(packAnswers(chunk), { ...input, into: short });
    expect(fresh?.bytes.buffer).not.toBe(short);
    expect(Buffer.from(fresh?.bytes ?? []).toString('utf8')).toBe(want);
  });

  it('quotes an answer that needs it, as csv-stringify would', () => {
    const { piece, lines } = pieceOf(ROWS);
    const { chunk, sent } = answeredChunk(false, ROWS, (slot) => (slot % 5 === 0 ? `u,"${slot}"` : `u${slot}`));
    const layout = { keep: null, prefixes: ['', 'p_'], emitHash: false, timeFormat: 'unix' as const };
    const want = expected(lines, chunk, sent, false, layout);
    expect(want.bytes).toMatch(/"u,""\d+"""/);
    const input = { piece, inputWidth: INPUT_WIDTH, width: WIDTH, v2: false, layout, sent, rejects: false, fitLine };
    const got = csvPieceBytes(packAnswers(chunk), input);
    expect(Buffer.from(got?.bytes ?? []).toString('utf8')).toBe(want.bytes);
    expect(got?.rejectBytes).toBeNull();
  });

  it('leaves a piece with a quote, bytes that are not UTF-8, or answers that are not ASCII to the rows of strings', () => {
    const { chunk, sent } = answeredChunk(false, 2);
    const layout = { keep: null, prefixes: ['', 'p_'], emitHash: false, timeFormat: 'unix' as const };
    const input = { inputWidth: INPUT_WIDTH, width: WIDTH, v2: false, layout, sent, rejects: false, fitLine };
    const answers = packAnswers(chunk);
    expect(csvPieceBytes(answers, { ...input, piece: Buffer.from('a,b,c,d\n1,"2",3,4\n') })).toBeUndefined();
    expect(
      csvPieceBytes(answers, { ...input, piece: Buffer.from([0x61, 0x2c, 0xff, 0x0a, 0x62, 0x0a]) }),
    ).toBeUndefined();
    expect(csvPieceBytes(answers, { ...input, piece: Buffer.from('a,b,c,d\n1,2,3,4\n') })).toBeDefined();
    const { chunk: wide } = answeredChunk(false, 2, () => 'ü');
    expect(csvPieceBytes(packAnswers(wide), { ...input, piece: Buffer.from('a,b,c,d\n1,2,3,4\n') })).toBeUndefined();
  });

  it('refuses a piece whose lines are not its answered rows', () => {
    const { chunk, sent } = answeredChunk(false, 3);
    const layout = { keep: null, prefixes: ['', 'p_'], emitHash: false, timeFormat: 'unix' as const };
    const input = { inputWidth: INPUT_WIDTH, width: WIDTH, v2: false, layout, sent, rejects: false, fitLine };
    expect(() => csvPieceBytes(packAnswers(chunk), { ...input, piece: Buffer.from('a,b,c,d\n\n1,2,3,4\n') })).toThrow(
      /2 lines for its 3/,
    );
    expect(() => csvPieceBytes(packAnswers(chunk), { ...input, piece: Buffer.from('a\nb\nc\nd\n') })).toThrow(
      /more lines/,
    );
  });
});
