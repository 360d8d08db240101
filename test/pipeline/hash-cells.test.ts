import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { normalizeHash } from '../../src/identity/index.js';
import { hashCell } from '../../src/pipeline/io/output/hash-cells.js';

const digest = (s: string, encoding: 'hex' | 'base64'): string =>
  createHash('sha256').update(s, 'utf8').digest(encoding);

describe('hashCell', () => {
  it('hex is the lowercase hex of the same SHA-256, and reads back as the same hash', () => {
    for (const value of ['user@example.com', '+14155550100', '']) {
      const base64 = digest(value, 'base64');
      const cell = hashCell(base64, 'hex');
      expect(cell).toBe(digest(value, 'hex'));
      expect(cell).toMatch(/^[0-9a-f]{64}$/);
      expect(normalizeHash(cell)).toBe(base64);
    }
  });

  it('base64, or no encoding given, is the hash as held; an empty cell stays empty', () => {
    const base64 = digest('user@example.com', 'base64');
    expect(hashCell(base64, 'base64')).toBe(base64);
    expect(hashCell(base64, undefined)).toBe(base64);
    expect(hashCell('', 'hex')).toBe('');
  });
});

describe('hashCell on texts of other lengths', () => {
  it('writes the hex of whatever bytes the base64 stands for, short or long', () => {
    for (const bytes of [1, 31, 33, 66, 200]) {
      const value = Buffer.alloc(bytes, 0xab);
      expect(hashCell(value.toString('base64'), 'hex')).toBe(value.toString('hex'));
    }
  });
});
