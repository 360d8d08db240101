import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { commitTogether } from '../../src/pipeline/io/output/commit-together.js';
import { openSink } from '../../src/pipeline/io/output/sink.js';
import { tempDir } from '../helpers/map-e2e-data.js';

const dir = tempDir('commit-together');
afterAll(() => dir.remove());
let n = 0;
const fresh = (): string => {
  const d = join(dir.path, `case${++n}`);
  mkdirSync(d);
  return d;
};

async function twoOutputs(d: string) {
  const out = await openSink({ path: join(d, 'out.csv'), format: 'csv', header: ['id'] });
  const rejects = await openSink({ path: join(d, 'rejects.csv'), format: 'csv', header: ['id'] });
  await out.writeRows([['1'], ['2']]);
  await rejects.writeRows([['2']]);
  return { out, rejects };
}

describe('commitTogether', () => {
  it('renames every output into place', async () => {
    const d = fresh();
    const { out, rejects } = await twoOutputs(d);
    await commitTogether([out, undefined, rejects]);
    expect(readFileSync(join(d, 'out.csv'), 'utf8')).toBe('id\n1\n2\n');
    expect(readFileSync(join(d, 'rejects.csv'), 'utf8')).toBe('id\n2\n');
    expect(readdirSync(d).sort()).toEqual(['out.csv', 'rejects.csv']);
  });

  it('replaces none when one cannot be put in place, and leaves no temp file', async () => {
    const d = fresh();
    writeFileSync(join(d, 'out.csv'), 'an earlier run\n');
    const { out, rejects } = await twoOutputs(d);
    // the rejects path became a directory while the run was going
    mkdirSync(join(d, 'rejects.csv'));
    await expect(commitTogether([out, rejects])).rejects.toThrow(/rejects\.csv.*is a directory/);
    expect(readFileSync(join(d, 'out.csv'), 'utf8')).toBe('an earlier run\n');
    expect(readdirSync(d).sort()).toEqual(['out.csv', 'rejects.csv']);
  });

  it('drops the outputs after the one that failed', async () => {
    const d = fresh();
    mkdirSync(join(d, 'out.csv'));
    const { out, rejects } = await twoOutputs(d);
    await expect(commitTogether([out, rejects])).rejects.toThrow(/is a directory/);
    expect(readdirSync(d).sort()).toEqual(['out.csv']);
  });
});
