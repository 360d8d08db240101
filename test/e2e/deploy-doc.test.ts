// Every uid2-batch command line in docs/deploy.md runs as written, in order, against the local service.
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, ensureBuilt, ROOT } from '../helpers/map-e2e-build.js';
import { emailRows, tempDir } from '../helpers/map-e2e-data.js';
import { cleanEnv, runCli } from '../helpers/map-e2e-processes.js';

const COMMAND = /uid2-batch (map|remap-due|optout-check|state|hash|token|doctor|migrate)\b.*$/;

/** The command lines of the doc's code blocks, in order, as a shell would run them (quotes of YAML or Python off). */
function commandLines(markdown: string): string[] {
  const lines: string[] = [];
  let inBlock = false;
  for (const line of markdown.split('\n')) {
    if (line.trimStart().startsWith('```')) {
      inBlock = !inBlock;
      continue;
    }
    const m = inBlock ? COMMAND.exec(line) : null;
    if (m !== null) lines.push(m[0].replace(/",?$/, '').trim());
  }
  return lines;
}

const dir = tempDir('deploy-doc');
const data = join(dir.path, 'data');
const shims = join(dir.path, 'bin');
let commands: string[];

beforeAll(() => {
  ensureBuilt();
  commands = commandLines(readFileSync(join(ROOT, 'docs', 'deploy.md'), 'utf8'));
  for (const sub of ['changes', 'metrics', 'mapped', 'backup', 'unload'])
    mkdirSync(join(data, sub), { recursive: true });
  writeFileSync(join(data, 'customers.csv'), readFileSync(join(ROOT, 'samples', 'customers.csv')));
  const rows = emailRows(900)
    .split('\n')
    .filter((l) => l !== '');
  const [header, ...body] = rows;
  for (let p = 0; p < 3; p++)
    writeFileSync(
      join(data, 'unload', `data_${p}.csv`),
      `${header}\n${body.slice(p * 300, (p + 1) * 300).join('\n')}\n`,
    );
  mkdirSync(shims);
  // the command as an installed package puts it on PATH
  const shim = join(shims, 'uid2-batch');
  writeFileSync(shim, `#!/bin/sh\nexec "${process.execPath}" "${BIN}" "$@"\n`);
  chmodSync(shim, 0o755);
});

afterAll(() => dir.remove());

/** One command line through sh, as the scheduler's shell runs it, with the local service and /data here. */
function runLine(
  line: string,
  extraEnv: Record<string, string> = {},
): Promise<{ code: number | null; stderr: string }> {
  const local = line.replaceAll('--env prod', '--env local').replaceAll('/data/', `${data}/`);
  const child = spawn('/bin/sh', ['-c', local], {
    cwd: dir.path,
    env: cleanEnv({ PATH: `${shims}:${process.env.PATH ?? ''}`, ...extraEnv }),
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, stderr })));
}

describe('docs/deploy.md', () => {
  it('names the commands a deployment runs: the first map, remap-due, state checkpoint and map --shard', () => {
    expect(commands.length).toBeGreaterThanOrEqual(6);
    expect(commands.some((c) => c.startsWith('uid2-batch map') && c.includes('--state'))).toBe(true);
    expect(commands.some((c) => c.startsWith('uid2-batch remap-due'))).toBe(true);
    expect(commands.some((c) => c.startsWith('uid2-batch state checkpoint'))).toBe(true);
    expect(commands.some((c) => c.includes('--shard') && c.includes('JOB_COMPLETION_INDEX'))).toBe(true);
  });

  it('every command line runs and exits 0, in the order written; the Indexed Job outputs end to end are one run', async () => {
    for (const line of commands) {
      if (line.includes('JOB_COMPLETION_INDEX')) {
        // the four pods of the Indexed Job
        for (let index = 0; index < 4; index++) {
          const run = await runLine(line, { JOB_COMPLETION_INDEX: String(index) });
          expect(run.code, `${line} (index ${index}): ${run.stderr}`).toBe(0);
        }
        continue;
      }
      const run = await runLine(line);
      expect(run.code, `${line}: ${run.stderr}`).toBe(0);
    }
    const parts = [0, 1, 2, 3].map((i) => readFileSync(join(data, 'mapped', `mapped-${i}.csv`), 'utf8'));
    const one = await runCli(['map', join(data, 'unload'), '--env', 'local', '--quiet']);
    expect(one.code).toBe(0);
    expect(parts.join('')).toBe(one.stdout);
    // three parts over four pods: the last pod has no part, and writes nothing
    expect(parts.map((p) => p.split('\n').length > 2)).toEqual([true, true, true, false]);
    expect(existsSync(join(data, 'metrics', 'uid2_remap.prom'))).toBe(true);
    expect(readFileSync(join(data, 'changes', 'changes-airflow.csv'), 'utf8')).toMatch(/^hash_type,/);
  }, 240_000);
});
