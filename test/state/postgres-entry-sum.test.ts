import { hash } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import type { StateRecord } from '../../src/state/backend.js';
import { entrySumOf } from '../../src/state/postgres/schema.js';
import { STATUS_CODE, TYPE_CODE } from '../../src/state/schema.js';

const sha = (s: string): string => hash('sha256', s, 'base64');

const base: StateRecord = {
  type: 'email',
  hash: 'aGFzaA==',
  status: 'mapped',
  due: false,
  u: 'dQ==',
  p: null,
  r: 1768435200,
  bucketId: 'b1',
  lastMappedS: 1768000000,
  lastOptoutCheckS: null,
  optedOutSinceMs: null,
};

/** The same sum made another way: the layout written into a buffer, summed by zlib. */
function referenceSum(e: StateRecord): number {
  const parts: Buffer[] = [Buffer.from([TYPE_CODE[e.type]])];
  const text = (v: string | null) => {
    const n = Buffer.alloc(4);
    n.writeUInt32LE(v === null ? 0xffffffff : v.length);
    parts.push(n, Buffer.from(v ?? '', 'utf8'));
  };
  const number = (v: number | null) => {
    if (v === null) return parts.push(Buffer.from([0]));
    const b = Buffer.alloc(9);
    b[0] = 1;
    b.writeDoubleLE(v, 1);
    parts.push(b);
  };
  text(e.hash);
  parts.push(Buffer.from([STATUS_CODE[e.status], e.due ? 1 : 0]));
  text(e.u);
  text(e.p);
  text(e.bucketId);
  for (const v of [e.r, e.lastMappedS, e.lastOptoutCheckS, e.optedOutSinceMs]) number(v);
  return crc32(Buffer.concat(parts)) | 0;
}

describe('PostgreSQL state: the checksum of an entry row', () => {
  it('is the CRC-32 of the row laid out in bytes, texts as UTF-8', () => {
    for (const e of [
      base,
      { ...base, hash: 'é€😀 and a lone \ud800 surrogate', bucketId: null, r: null, optedOutSinceMs: -0.5 },
      { ...base, type: 'phone' as const, status: 'optout' as const, due: true, u: null, p: 'ü', r: Number.NaN },
      // texts of the service's sizes, and ASCII runs broken by other characters at every offset of four
      { ...base, hash: sha('h'), u: sha('u'), p: `${sha('p')}x`, bucketId: 'bucket-17', lastOptoutCheckS: 1e300 },
      ...[0, 1, 2, 3, 4, 5, 9].map((at) => ({ ...base, hash: `${sha('h').slice(0, at)}é${sha('h').slice(at)}` })),
    ]) {
      expect(entrySumOf(e)).toBe(referenceSum(e));
    }
  });

  it('changes with every value, and when a value moves to another column', () => {
    const sums = new Set(
      [
        base,
        { ...base, type: 'phone' as const },
        { ...base, hash: 'aGFzaB==' },
        { ...base, status: 'optout' as const },
        { ...base, due: true },
        { ...base, u: null },
        { ...base, u: null, p: 'dQ==' },
        { ...base, r: (base.r as number) + 1 },
        { ...base, bucketId: null },
        { ...base, lastMappedS: null, lastOptoutCheckS: base.lastMappedS },
        { ...base, optedOutSinceMs: 0 },
        { ...base, hash: 'aGFzaA==b1', bucketId: '' },
      ].map((e) => entrySumOf(e)),
    );
    expect(sums.size).toBe(12);
  });

  it('is the same summed from bytes where the hash and raw UIDs lie, at any offset and length', () => {
    const cases: [string, string, string | null][] = [
      [sha('h'), sha('u'), null],
      [sha('h'), 'dQ==', `${sha('p')}x`],
      ['aGFzaA==', sha('u').slice(0, 43), sha('p')],
    ];
    for (const [hash, u, p] of cases) {
      const e = { ...base, hash, u, p };
      for (const pad of [0, 1, 2, 3, 5]) {
        const line = Buffer.from(`${'-'.repeat(pad)}${u},${p ?? ''}`, 'latin1');
        const hashes = Buffer.from(`${'#'.repeat(pad)}${hash}`, 'latin1');
        const at = { hashes, hash: pad, line, u: pad, p: p === null ? -1 : pad + u.length + 1 };
        expect(entrySumOf(e, at)).toBe(referenceSum(e));
        // bytes that are not the record's texts give another sum
        expect(entrySumOf(e, { ...at, u: at.u + 1 })).not.toBe(referenceSum(e));
      }
    }
  });

  it('reads a lone surrogate as the U+FFFD that UTF-8 stores for it', () => {
    expect(entrySumOf({ ...base, bucketId: 'x\udc00' })).toBe(entrySumOf({ ...base, bucketId: 'x\ufffd' }));
  });
});
