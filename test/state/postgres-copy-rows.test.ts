import { hash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { StateRecord } from '../../src/state/backend.js';
import { copyRowsOf } from '../../src/state/postgres/copy-rows.js';
import { entrySumOf } from '../../src/state/postgres/schema.js';
import {
  bytesOfText,
  HASH_BYTES,
  RAW_UID_BYTES,
  textBytesBound,
  writeTextBytes,
} from '../../src/state/postgres/stored-bytes.js';
import { seeded } from '../helpers/seeded-random.js';

const sha = (s: string): string => hash('sha256', s, 'base64');

/** Texts of every shape a hash or raw UID may have: canonical base64 of either size, near misses, any text. */
function texts(): string[] {
  const random = seeded(29);
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=';
  const h = sha('x');
  const out = [
    '',
    'h1',
    'é€😀',
    '\ud800',
    'x'.repeat(HASH_BYTES - 1),
    'x'.repeat(RAW_UID_BYTES - 1),
    `${h.slice(0, 42)}B=`,
    `${h.slice(0, 43)}A`,
    `${h.slice(0, 42)}=A`,
    `${h.slice(0, 43)}.`,
    `é${h.slice(1)}`,
    h,
    Buffer.alloc(RAW_UID_BYTES, 9).toString('base64'),
  ];
  for (let i = 0; i < 300; i++) {
    out.push(
      sha(`h${i}`),
      Buffer.from(sha(`u${i}`) + sha(`v${i}`), 'base64')
        .subarray(0, 33)
        .toString('base64'),
    );
    // 44 characters of the alphabet, '=' anywhere
    out.push(Array.from({ length: 44 }, () => alphabet[Math.floor(random() * alphabet.length)]).join(''));
  }
  return out;
}

/** The fields of each row of a binary COPY: null, or the field's bytes. */
function rowsOf(data: Buffer): (Buffer | null)[][] {
  expect(data.subarray(0, 11).toString('latin1')).toBe('PGCOPY\n\xff\r\n\0');
  expect(data.readInt32BE(11)).toBe(0);
  expect(data.readInt32BE(15)).toBe(0);
  let at = 19;
  const rows: (Buffer | null)[][] = [];
  for (;;) {
    const fields = data.readInt16BE(at);
    at += 2;
    if (fields === -1) break;
    const row: (Buffer | null)[] = [];
    for (let f = 0; f < fields; f++) {
      const n = data.readInt32BE(at);
      at += 4;
      row.push(n === -1 ? null : data.subarray(at, at + n));
      if (n > 0) at += n;
    }
    rows.push(row);
  }
  expect(at).toBe(data.length);
  return rows;
}

describe('PostgreSQL state: new entries as binary COPY rows', () => {
  it('writes the bytes bytesOfText keeps for any text, within the room it leaves', () => {
    for (const width of [HASH_BYTES, RAW_UID_BYTES]) {
      for (const text of texts()) {
        const room = textBytesBound(text, width);
        const out = Buffer.alloc(room + 2, 0xaa);
        const n = writeTextBytes(text, width, out, 1);
        expect(out.subarray(1, 1 + n)).toEqual(bytesOfText(text, width));
        expect(n).toBeLessThanOrEqual(room);
        expect(out[0]).toBe(0xaa);
        expect(out[room + 1]).toBe(0xaa);
      }
    }
  });

  it('lays out each column as its type is sent in binary, after the header and before the trailer', () => {
    const all = texts();
    const records: StateRecord[] = all.map((text, i) => ({
      type: i % 2 === 0 ? 'email' : 'phone',
      hash: text,
      status: i % 3 === 0 ? 'optout' : 'mapped',
      due: i % 5 === 0,
      u: i % 3 === 0 ? null : all[(i + 1) % all.length],
      p: i % 4 === 0 ? all[(i + 2) % all.length] : null,
      r: i % 3 === 0 ? null : 1_700_000_000 + i * 0.5,
      bucketId: i % 7 === 0 ? null : `bucket ${i} é`,
      lastMappedS: i % 6 === 0 ? null : 1_600_000_000 + i,
      lastOptoutCheckS: i % 2 === 0 ? null : -i,
      optedOutSinceMs: i % 3 === 0 ? 1_650_000_000_000 + i : null,
    }));
    // in chunks, as a COPY sends them: the header with the first, the trailer with the last
    const cut = [0, 1, 2, 300, records.length];
    const data = Buffer.concat(
      cut.slice(1).map((to, c) => copyRowsOf(records, cut[c], to, c === 0, to === records.length)),
    );
    const rows = rowsOf(data);
    expect(rows).toHaveLength(records.length);
    const float = (b: Buffer | null) => (b === null ? null : b.readDoubleBE(0));
    const raw = (t: string | null) => (t === null ? null : bytesOfText(t, RAW_UID_BYTES));
    rows.forEach((row, i) => {
      const e = records[i];
      expect(row).toHaveLength(11);
      expect(row[0]).toEqual(Buffer.concat([Buffer.from([i % 2]), bytesOfText(e.hash, HASH_BYTES)]));
      expect(row[1]?.readInt16BE(0)).toBe(i % 3 === 0 ? 2 : 1);
      expect(row[2]).toEqual(Buffer.from([e.due ? 1 : 0]));
      expect(row[3]).toEqual(raw(e.u));
      expect(row[4]).toEqual(raw(e.p));
      expect(float(row[5])).toBe(e.r);
      expect(row[6] === null ? null : row[6].toString('utf8')).toBe(e.bucketId);
      expect([float(row[7]), float(row[8]), float(row[9])]).toEqual([
        e.lastMappedS,
        e.lastOptoutCheckS,
        e.optedOutSinceMs,
      ]);
      expect(row[10]?.readInt32BE(0)).toBe(entrySumOf(e));
    });
  });
});
