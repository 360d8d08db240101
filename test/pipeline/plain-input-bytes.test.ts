import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { plainInputBytes, settleInput } from '../../src/pipeline/jobs/run-input.js';

const dir = mkdtempSync(join(tmpdir(), 'uid2-plain-bytes-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, bytes: number): string {
  const path = join(dir, name);
  writeFileSync(path, 'x'.repeat(bytes));
  return path;
}

async function bytesOf(paths: string[]): Promise<number | undefined> {
  return plainInputBytes(await settleInput(paths, { format: 'csv', delimiter: ',' }));
}

describe('plainInputBytes (what the planner of threads weighs)', () => {
  it('sums the sizes of plain local parts', async () => {
    expect(await bytesOf([file('a.csv', 120), file('b.csv', 30)])).toBe(150);
  });

  it('knows no size for stdin, S3, compressed parts, a directory or a missing file', async () => {
    expect(await bytesOf(['-'])).toBeUndefined();
    expect(await bytesOf([file('c.csv', 10), file('d.csv.gz', 10)])).toBeUndefined();
    expect(await bytesOf([file('e.csv', 10), join(dir, 'missing.csv')])).toBeUndefined();
    expect(await bytesOf([dir])).toBeUndefined();
    expect(
      await plainInputBytes({
        ...(await settleInput([file('f.csv', 5)], {})),
        parts: [{ path: 's3://b/k.csv', format: 'csv' }],
      }),
    ).toBeUndefined();
  });
});
