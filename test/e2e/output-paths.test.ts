import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import { tempDir } from '../helpers/map-e2e-data.js';
import { runCli } from '../helpers/map-e2e-processes.js';

// Every command that writes files refuses, with exit 2 and before reading, an output that is its input, its
// state file or another of its outputs.

const dir = tempDir('output-paths');
const INPUT = 'email,raw_uid\na@example.com,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n';
let input = '';

beforeAll(() => {
  ensureBuilt();
  input = dir.file('in.csv', INPUT);
}, 120_000);
afterAll(() => dir.remove());

const noOutputs = (): string[] => readdirSync(dir.path).filter((n) => n !== 'in.csv' && n !== 'state.db');

describe('outputs that overlap the input or each other', () => {
  const cases: { name: string; args: () => string[] }[] = [
    { name: 'hash -o INPUT', args: () => ['hash', input, '-o', input] },
    {
      name: 'hash -o X --summary-json X',
      args: () => ['hash', input, '-o', join(dir.path, 'x.csv'), '--summary-json', join(dir.path, 'x.csv')],
    },
    { name: 'optout-check INPUT -o INPUT', args: () => ['optout-check', input, '-o', input, '--env', 'local'] },
    {
      name: 'token generate --input INPUT -o INPUT',
      args: () => ['token', 'generate', '--input', input, '-o', input, '--env', 'local'],
    },
    {
      name: 'remap-due --state S -o S',
      args: () => [
        'remap-due',
        '--state',
        join(dir.path, 'state.db'),
        '-o',
        join(dir.path, 'state.db'),
        '--env',
        'local',
      ],
    },
    {
      name: 'migrate --state S --summary-json S',
      args: () => [
        'migrate',
        '--state',
        join(dir.path, 'state.db'),
        '--summary-json',
        join(dir.path, 'state.db'),
        '--env',
        'local',
      ],
    },
  ];
  for (const c of cases) {
    it(`${c.name}: exit 2, one line, nothing written`, async () => {
      const r = await runCli(c.args());
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/^uid2-batch: .* is the same file as .*\n$/);
      expect(readFileSync(input, 'utf8')).toBe(INPUT);
      expect(noOutputs()).toEqual([]);
    });
  }
});
