// bench/run.mjs's command line: --help prints the usage, and an option it does not know is refused before any run.
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

function bench(...args: string[]) {
  // a bench that ignored these would start its runs: the timeout ends it, and the test fails on the exit code
  return spawnSync(process.execPath, ['bench/run.mjs', ...args], { encoding: 'utf8', timeout: 20_000 });
}

describe('bench/run.mjs options', () => {
  it('--help prints the usage of the opening comment and runs nothing', () => {
    const r = bench('--help');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^`npm run bench`: the performance figures/);
    expect(r.stdout).toContain('npm run bench -- --only map1m,hash');
    expect(r.stdout).not.toMatch(/^\/\//m);
    expect(r.stderr).toBe('');
  });

  it.each([
    [['--bogus'], "unknown option '--bogus'"],
    [['--runs', '1', '--thread', '0'], "unknown option '--thread'"],
    [['--only', 'map1m,mapp'], "--only: no case 'mapp'"],
    [['--runs'], '--runs needs a value'],
    [['--only', 'nodes', '--nodes', '20,v24'], "--nodes: 'v24' is not a Node version"],
  ])('refuses %j with one line', (args, message) => {
    const r = bench(...args);
    expect(r.status).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr.trim().split('\n')).toEqual([expect.stringContaining(message)]);
  });
});
