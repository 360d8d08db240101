import { describe, expect, it } from 'vitest';
import { crc32 } from 'node:zlib';
import { recordCheckOf } from '../../src/state/checksum.js';
import { EntryView, type EntryValues, RecordFormatError, RecordWriter } from '../../src/state/entry-record.js';

function bytes(n: number, seed: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (seed * 31 + i * 7) & 255;
  return b;
}

const mapped: EntryValues = {
  type: 1,
  status: 1,
  due: false,
  hash: bytes(32, 1),
  u: bytes(33, 2),
  p: null,
  r: 1_790_000_000,
  bucketId: null,
  lastMappedS: 1_780_000_000,
  lastOptoutCheckS: null,
  optedOutSinceMs: null,
};

// every optional value and every odd form at once, and each on its own
const odd: EntryValues[] = [
  { ...mapped, type: 0, p: bytes(33, 3), due: true, bucketId: 'bucket-é', lastOptoutCheckS: 1_785_000_000 },
  { ...mapped, status: 2, u: null, r: null, optedOutSinceMs: 1_781_234_567_890, lastOptoutCheckS: 0 },
  { ...mapped, status: 3, u: null, r: null, lastMappedS: null },
  { ...mapped, hash: 'not base64 at all: ünïcode', u: 'raw uid as text', p: bytes(5, 9) },
  { ...mapped, hash: bytes(200, 4), u: bytes(0, 5), p: '' },
  { ...mapped, r: 1.5, lastMappedS: -3, lastOptoutCheckS: 2 ** 40 },
  { ...mapped, r: 2 ** 32 - 1, lastMappedS: 0 },
  { ...mapped, status: 0, bucketId: '' },
  { ...mapped, u: bytes(32, 6), p: bytes(32, 7) },
  { ...mapped, u: bytes(32, 6), p: bytes(33, 7) },
  { ...mapped, u: null, p: bytes(32, 7), due: true },
];

function plain(v: EntryValues): unknown {
  const form = (x: Uint8Array | string | null) =>
    x === null || typeof x === 'string' ? x : Buffer.from(x).toString('hex');
  return { ...v, hash: form(v.hash), u: form(v.u), p: form(v.p) };
}

describe('entry records', () => {
  it('give back every value they were written with', () => {
    const writer = new RecordWriter(256);
    const view = new EntryView();
    for (const v of [mapped, ...odd]) {
      const record = writer.write(v);
      expect(view.read(record, 0)).toBe(record.length);
      expect(plain(view.values())).toEqual(plain(v));
    }
  });

  it('keep a mapped entry to its values and one flags byte', () => {
    const record = new RecordWriter().write(mapped);
    // and the 2-byte check at the end
    expect(record.length).toBe(1 + 32 + 33 + 4 + 4 + 2);
    expect(new RecordWriter().write({ ...mapped, p: bytes(33, 3) }).length).toBe(1 + 32 + 33 + 33 + 4 + 4 + 2);
    // the service's older raw UIDs are 32 bytes: as short
    expect(new RecordWriter().write({ ...mapped, u: bytes(32, 2), p: bytes(32, 3) }).length).toBe(
      1 + 32 + 32 + 32 + 8 + 2,
    );
    // a second flags byte only for what a mapped v3 entry does not have
    expect(new RecordWriter().write({ ...mapped, lastOptoutCheckS: 5 }).length).toBe(2 + 32 + 33 + 4 + 4 + 4 + 2);
    expect(new RecordWriter().write({ ...mapped, u: bytes(32, 2), p: bytes(33, 3) }).length).toBe(
      2 + 33 + 33 + 34 + 8 + 2,
    );
  });

  it('are read one after the other from a blob of many', () => {
    const writer = new RecordWriter(64);
    const all = [mapped, ...odd, mapped, ...odd];
    const joined = Buffer.concat(all.map((v) => writer.write(v)));
    const seen: unknown[] = [];
    const view = new EntryView();
    for (let at = 0; at < joined.length; ) {
      at = view.read(joined, at);
      seen.push(plain(view.values()));
    }
    expect(seen).toEqual(all.map(plain));
  });

  it('keep each record whole when the writer moves to a new buffer', () => {
    const writer = new RecordWriter(256);
    const records = Array.from({ length: 50 }, (_, i) => writer.write({ ...mapped, r: i }));
    const view = new EntryView();
    const rs = records.map((record) => {
      view.read(record, 0);
      return view.r;
    });
    expect(rs).toEqual(records.map((_, i) => i));
  });

  it('keep whole records of many-byte text and every value, whichever room is left in the buffer', () => {
    const writer = new RecordWriter(256);
    const text = (n: number) => '😀é'.repeat(n);
    const widest = (n: number): EntryValues => ({
      ...odd[0],
      hash: text(n),
      u: text(n + 1),
      p: text(n + 2),
      bucketId: text(n + 3),
      r: 1.5,
      optedOutSinceMs: 7,
    });
    const all = Array.from({ length: 60 }, (_, n) => widest(n));
    const records = all.map((v) => writer.write(v));
    const view = new EntryView();
    expect(
      records.map((record) => {
        expect(view.read(record, 0)).toBe(record.length);
        return plain(view.values());
      }),
    ).toEqual(all.map(plain));
  });

  it('refuse a record cut short, and values the format cannot hold', () => {
    const record = new RecordWriter().write(odd[0]);
    const view = new EntryView();
    for (let cut = 0; cut < record.length; cut++) {
      expect(() => view.read(record.subarray(0, cut), 0)).toThrow(RecordFormatError);
    }
    expect(() => new RecordWriter().write({ ...mapped, type: 2 })).toThrow(TypeError);
    expect(() => new RecordWriter().write({ ...mapped, status: 4 })).toThrow(TypeError);
  });

  it('refuses a record any of whose bytes was flipped: a checksum failure, never other values', () => {
    const record = new RecordWriter().write(mapped);
    for (let i = 0; i < record.length; i++) {
      const flipped = Buffer.from(record);
      flipped[i] ^= 0x01;
      expect(() => new EntryView().read(flipped, 0)).toThrow(/checksum|cut short|runs past/);
    }
  });
});

describe("a record's check", () => {
  it('is the low 16 bits of the CRC-32 zlib gives, at every length and offset', () => {
    const bytes = Buffer.from(Array.from({ length: 300 }, (_, i) => (i * 7919 + (i >> 3)) & 255));
    for (const start of [0, 1, 2, 3, 17])
      for (const length of [0, 1, 3, 4, 5, 74, 76, 77, 200])
        expect(recordCheckOf(bytes, start, start + length)).toBe(crc32(bytes.subarray(start, start + length)) & 0xffff);
  });
});
