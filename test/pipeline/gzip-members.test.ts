import { execFileSync } from 'node:child_process';
import { DuckDBInstance } from '@duckdb/node-api';
import { writeFileSync } from 'node:fs';
import { PassThrough } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { gunzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { GzipMembers } from '../../src/pipeline/io/output/gzip-members.js';
import { tempDir } from '../helpers/map-e2e-data.js';

const dir = tempDir('gzip-members');
afterAll(() => dir.remove());

/** Seeded text chunks of uneven sizes, some far above a member's size, as buffers and strings. */
function chunks(seed: number, count: number): (Buffer | string)[] {
  let x = seed;
  const next = () => {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    return x;
  };
  return Array.from({ length: count }, (_, i) => {
    const size = next() % 5 === 0 ? 1_500_000 + (next() % 700_000) : next() % 200_000;
    const line = `row ${i},${next().toString(36)},${'abcdefghij'.repeat(3)}\n`;
    const text = line.repeat(Math.ceil(size / line.length)).slice(0, size);
    return i % 3 === 0 ? text : Buffer.from(text);
  });
}

async function compress(parts: (Buffer | string)[], afterEachWrite?: (part: Buffer | string) => void): Promise<Buffer> {
  const gz = new GzipMembers();
  const out: Buffer[] = [];
  const sink = new PassThrough();
  sink.on('data', (d: Buffer) => out.push(d));
  const done = pipeline(gz, sink);
  for (const part of parts) {
    await new Promise<void>((resolve, reject) => {
      gz.write(part, (err) => {
        if (err) reject(err);
        else {
          afterEachWrite?.(part);
          resolve();
        }
      });
    });
  }
  gz.end();
  await done;
  return Buffer.concat(out);
}

/** The offsets of gzip member headers (1f 8b 08) that gunzip accepts as the start of the rest of the file. */
function memberCount(bytes: Buffer): number {
  let n = 0;
  for (let i = bytes.indexOf('1f8b08', 0, 'hex'); i !== -1; i = bytes.indexOf('1f8b08', i + 1, 'hex')) {
    try {
      gunzipSync(bytes.subarray(i));
      n++;
    } catch {
      // three bytes inside compressed data that only look like a header
    }
  }
  return n;
}

describe('GzipMembers', () => {
  it('gives back every byte in order, as several members, whatever the chunk sizes', async () => {
    const parts = chunks(7, 60);
    const expected = Buffer.concat(parts.map((p) => Buffer.from(p)));
    const gz = await compress(parts);
    expect(gunzipSync(gz).equals(expected)).toBe(true);
    expect(memberCount(gz)).toBeGreaterThan(3);
    expect(gz.length).toBeLessThan(expected.length / 2);
  });

  it('does not depend on a written buffer after its write is done (the sink releases it then)', async () => {
    const parts = chunks(11, 30).map((p) => Buffer.from(p));
    const expected = Buffer.concat(parts.map((p) => Buffer.from(p)));
    // what releaseWhenWritten does: the buffer's memory is moved away, its view becomes empty
    let released = 0;
    const gz = await compress(parts, (part) => {
      const buffer = (part as Buffer).buffer;
      if (buffer instanceof ArrayBuffer && buffer.byteLength === (part as Buffer).length && buffer.byteLength > 0) {
        structuredClone(buffer, { transfer: [buffer] });
        released++;
      }
    });
    expect(released).toBeGreaterThan(20);
    expect(gunzipSync(gz).equals(expected)).toBe(true);
  });

  it('writes a gzip file of nothing for no input, and a small input as one member', async () => {
    const empty = await compress([]);
    expect(gunzipSync(empty).length).toBe(0);
    expect(memberCount(empty)).toBe(1);
    const small = await compress(['email\n', Buffer.from('a@example.com\n')]);
    expect(gunzipSync(small).toString()).toBe('email\na@example.com\n');
    expect(memberCount(small)).toBe(1);
  });

  it('is read whole by the gzip program', async () => {
    const parts = chunks(3, 20);
    const file = dir.file('members.csv.gz');
    writeFileSync(file, await compress(parts));
    const text = execFileSync('gzip', ['-dc', file], { maxBuffer: 256 * 1024 * 1024 });
    expect(text.equals(Buffer.concat(parts.map((p) => Buffer.from(p))))).toBe(true);
  });

  it('is read whole by a warehouse engine (DuckDB)', async () => {
    const lines = Array.from({ length: 150_000 }, (_, i) => `${i},user.${i}@example.com,${(i * 7919) % 100_003}\n`);
    const parts: string[] = ['n,email,x\n'];
    for (let i = 0; i < lines.length; i += 10_000) parts.push(lines.slice(i, i + 10_000).join(''));
    const file = dir.file('members-duck.csv.gz');
    const gz = await compress(parts);
    expect(memberCount(gz)).toBeGreaterThan(2);
    writeFileSync(file, gz);
    const db = await DuckDBInstance.create(':memory:');
    const rows = (
      await (
        await db.connect()
      ).runAndReadAll(
        `SELECT count(*), max(n), sum(x) FROM read_csv('${file}', header = true, columns = {'n': 'BIGINT', 'email': 'VARCHAR', 'x': 'BIGINT'})`,
      )
    ).getRows();
    const sum = lines.reduce((acc, _, i) => acc + ((i * 7919) % 100_003), 0);
    expect(rows).toEqual([[150_000n, 149_999n, BigInt(sum)]]);
  });
});
