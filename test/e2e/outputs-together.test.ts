import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import { emailRows, tempDir } from '../helpers/map-e2e-data.js';
import { runCli } from '../helpers/map-e2e-processes.js';

// The outputs of one run (-o, --rejects, --bad-rows, the parts of --output-dir) are renamed into place together,
// and only when the run succeeds: a run that fails replaces none of them, and leaves no temp file.

const dir = tempDir('outputs-together');
const EARLIER = 'an earlier run\n';

beforeAll(() => ensureBuilt(), 120_000);
afterAll(() => dir.remove());

const temps = (d: string): string[] => readdirSync(d).filter((n) => n.endsWith('.tmp'));

describe('outputs of one run are replaced together or not at all', () => {
  it('an output that names a directory: refused before anything runs, the other outputs as they were', async () => {
    const d = join(dir.path, 'dir-output');
    mkdirSync(d);
    const input = join(d, 'in.csv');
    writeFileSync(input, emailRows(50));
    const out = join(d, 'out.csv');
    writeFileSync(out, EARLIER);
    const aDirectory = join(d, 'rejects');
    mkdirSync(aDirectory);
    for (const args of [
      ['--rejects', aDirectory],
      ['--on-bad-row', 'skip', '--bad-rows', aDirectory],
    ]) {
      const r = await runCli(['map', input, '--env', 'local', '-o', out, ...args]);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toMatch(/^uid2-batch: --(rejects|bad-rows) '.*rejects' is a directory: /m);
      expect(readFileSync(out, 'utf8')).toBe(EARLIER);
      expect(temps(d)).toEqual([]);
    }
  });

  it("--output-dir: a run that fails in its second part leaves the first part's earlier output as it was", async () => {
    const d = join(dir.path, 'parts');
    const outDir = join(d, 'out');
    mkdirSync(outDir, { recursive: true });
    writeFileSync(join(d, 'a.csv'), emailRows(200, 'a'));
    // the second part is long, then holds a record that cannot be read: the run fails (exit 1) while in it
    writeFileSync(
      join(d, 'b.csv'),
      Buffer.concat([Buffer.from(emailRows(60_000, 'b')), Buffer.from([0x39, 0x2c, 0xff, 0xfe, 0x0a])]),
    );
    writeFileSync(join(outDir, 'a.csv'), EARLIER);
    const r = await runCli(['map', join(d, 'a.csv'), join(d, 'b.csv'), '--env', 'local', '--output-dir', outDir]);
    expect(r.code, r.stderr).toBe(1);
    expect(readFileSync(join(outDir, 'a.csv'), 'utf8')).toBe(EARLIER);
    expect(readdirSync(outDir).sort()).toEqual(['a.csv']);
  }, 60_000);

  it("a killed run's temp file under yesterday's name is removed by today's run into the same directory", async () => {
    const d = join(dir.path, 'nightly');
    mkdirSync(d);
    const input = join(d, 'in.csv');
    writeFileSync(input, emailRows(20));
    const dead = spawnSync(process.execPath, ['-e', '0']).pid as number;
    const leftover = `.hashed-2026-11-26.csv.${dead}.tmp`;
    writeFileSync(join(d, leftover), 'id,email\n1,raw@example.com\n');
    const r = await runCli(['hash', input, '-o', join(d, 'hashed-2026-11-27.csv')]);
    expect(r.code, r.stderr).toBe(0);
    expect(readdirSync(d).sort()).toEqual(['hashed-2026-11-27.csv', 'in.csv']);
  });
});
