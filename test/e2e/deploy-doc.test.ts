// Every uid2-batch command line in docs/deploy.md runs as written, in order, against the local service (and the
// lines under a PostgreSQL heading against a PostgreSQL server this file starts).
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, ensureBuilt, ROOT } from '../helpers/map-e2e-build.js';
import { emailRows, tempDir } from '../helpers/map-e2e-data.js';
import { cleanEnv, runCli } from '../helpers/map-e2e-processes.js';
import { usePostgres } from '../helpers/postgres.js';

const COMMAND = /uid2-batch (map|remap-due|optout-check|state|hash|token|doctor|migrate)\b.*$/;

// a heading of a section whose lines keep the state in the database that UID2_BATCH_STATE names
const DATABASE_HEADING = /^#+ .*(PostgreSQL|database)/;

interface CommandLine {
  line: string;
  /** Under a PostgreSQL heading: run with UID2_BATCH_STATE set to the test's database. */
  database: boolean;
}

/** The command lines of the doc's code blocks, in order, as a shell would run them (quotes of YAML or Python off). */
function commandLines(markdown: string): CommandLine[] {
  const lines: CommandLine[] = [];
  let inBlock = false;
  let database = false;
  for (const line of markdown.split('\n')) {
    if (line.trimStart().startsWith('```')) {
      inBlock = !inBlock;
      continue;
    }
    if (!inBlock && line.startsWith('#')) database = DATABASE_HEADING.test(line);
    const m = inBlock ? COMMAND.exec(line) : null;
    if (m !== null) lines.push({ line: m[0].replace(/",?$/, '').trim(), database });
  }
  return lines;
}

const dir = tempDir('deploy-doc');
const data = join(dir.path, 'data');
const shims = join(dir.path, 'bin');
const pg = usePostgres();
let markdown: string;
let commands: CommandLine[];

beforeAll(() => {
  ensureBuilt();
  markdown = readFileSync(join(ROOT, 'docs', 'deploy.md'), 'utf8');
  commands = commandLines(markdown);
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
    const lines = commands.filter((c) => !c.database).map((c) => c.line);
    expect(lines.some((c) => c.startsWith('uid2-batch map') && c.includes('--state'))).toBe(true);
    expect(lines.some((c) => c.startsWith('uid2-batch remap-due'))).toBe(true);
    expect(lines.some((c) => c.startsWith('uid2-batch state checkpoint'))).toBe(true);
    expect(lines.some((c) => c.includes('--shard') && c.includes('JOB_COMPLETION_INDEX'))).toBe(true);
  });

  it('names what runners sharing a database run: the first map, remap-due, and both with --shard', () => {
    const lines = commands.filter((c) => c.database).map((c) => c.line);
    expect(lines.some((c) => c.startsWith('uid2-batch map') && !c.includes('--shard'))).toBe(true);
    expect(lines.some((c) => c.startsWith('uid2-batch remap-due') && !c.includes('--shard'))).toBe(true);
    for (const command of ['map', 'remap-due'])
      expect(lines.some((c) => c.startsWith(`uid2-batch ${command}`) && c.includes('$JOB_COMPLETION_INDEX/4'))).toBe(
        true,
      );
    // the state comes from UID2_BATCH_STATE, and no line of the page holds a password but a placeholder
    for (const c of lines) expect(c).not.toContain('--state');
    for (const url of markdown.match(/postgres(ql)?:\/\/[^\s`]+/g) ?? [])
      expect(url).toMatch(/^[^:]+:\/\/[^:@/]+(:PASSWORD)?@/);
  });

  it('every command line runs and exits 0, in the order written; the Indexed Job outputs end to end are one run', async () => {
    const state = pg.schemaUrl();
    for (const { line, database } of commands) {
      const env: Record<string, string> = database ? { UID2_BATCH_STATE: state } : {};
      if (line.includes('JOB_COMPLETION_INDEX')) {
        // the four pods of the Indexed Job: one after another on files, all at once on the shared database
        const pods = [0, 1, 2, 3].map((index) => () => runLine(line, { ...env, JOB_COMPLETION_INDEX: String(index) }));
        const runs = database ? await Promise.all(pods.map((pod) => pod())) : [];
        if (!database) for (const pod of pods) runs.push(await pod());
        runs.forEach((run, index) => {
          expect(run.code, `${line} (index ${index}): ${run.stderr}`).toBe(0);
        });
        continue;
      }
      const run = await runLine(line, env);
      expect(run.code, `${line}: ${run.stderr}`).toBe(0);
    }
    const parts = [0, 1, 2, 3].map((i) => readFileSync(join(data, 'mapped', `mapped-${i}.csv`), 'utf8'));
    const one = await runCli(['map', join(data, 'unload'), '--env', 'local', '--quiet']);
    expect(one.code).toBe(0);
    expect(parts.join('')).toBe(one.stdout);
    const dbParts = [0, 1, 2, 3].map((i) => readFileSync(join(data, 'mapped', `db-mapped-${i}.csv`), 'utf8'));
    expect(dbParts.join('')).toBe(one.stdout);
    const info = await runCli(['state', 'info', state, '--json']);
    expect(info.code, info.stderr).toBe(0);
    // the first map's customers and the unload's addresses, each once
    expect((JSON.parse(info.stdout) as { entries: number }).entries).toBeGreaterThan(800);
    // three parts over four pods: the last pod has no part, and writes nothing
    expect(parts.map((p) => p.split('\n').length > 2)).toEqual([true, true, true, false]);
    expect(existsSync(join(data, 'metrics', 'uid2_remap.prom'))).toBe(true);
    expect(readFileSync(join(data, 'changes', 'changes-airflow.csv'), 'utf8')).toMatch(/^hash_type,/);
  }, 240_000);
});
