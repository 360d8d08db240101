import { readdirSync, readlinkSync, writeFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli/main.js';
import { tempDir } from '../helpers/map-e2e-data.js';

// A command that stops on a user's mistake after opening its input closes the file itself. Left to the garbage
// collector, Node closes it some time later with a warning on stderr, below the one-line error.
const dir = tempDir('input-closed');
afterAll(() => dir.remove());

/** The descriptors of this process that point at `path` (Linux: /proc/self/fd). */
function openDescriptorsOf(path: string): string[] {
  return readdirSync('/proc/self/fd').filter((fd) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`) === path;
    } catch {
      return false;
    }
  });
}

async function closedWithin(path: string, ms: number): Promise<boolean> {
  const until = Date.now() + ms;
  for (;;) {
    if (openDescriptorsOf(path).length === 0) return true;
    if (Date.now() > until) return false;
    await new Promise((r) => setTimeout(r, 10));
  }
}

// an input with a header and no column any command can use, large enough that it is not read whole at once
const input = dir.file('no-identifier.csv');
writeFileSync(input, `name,city\n${'someone,somewhere\n'.repeat(20_000)}`);

const failing: [string, string[]][] = [
  ['map', ['map', input, '--env', 'local', '-o', dir.file('m.csv'), '--quiet']],
  ['map --threads 2', ['map', input, '--env', 'local', '-o', dir.file('mt.csv'), '--threads', '2', '--quiet']],
  ['hash', ['hash', input, '-o', dir.file('h.csv'), '--quiet']],
  ['optout-check', ['optout-check', input, '--env', 'local', '-o', dir.file('o.csv'), '--quiet']],
  ['token validate', ['token', 'validate', '--input', input, '--env', 'local', '-o', dir.file('t.csv'), '--quiet']],
];

describe.runIf(process.platform === 'linux')('an input opened by a command that then refuses it', () => {
  it.each(failing)('%s closes the file before it returns the error', async (_, args) => {
    const program = await buildProgram();
    program.exitOverride();
    await expect(program.parseAsync(['node', 'uid2-batch', ...args])).rejects.toThrow(/column/);
    expect(await closedWithin(input, 1000), `descriptors still open on ${input}`).toBe(true);
  });
});
