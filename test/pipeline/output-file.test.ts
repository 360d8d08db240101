import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  linkSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  fileIdentity,
  removeStaleTemps,
  sameFile,
  writeTextAtomically,
  writeThroughTarget,
} from '../../src/pipeline/io/output/output-file.js';
import { openSink } from '../../src/pipeline/io/output/sink.js';

const dir = mkdtempSync(join(tmpdir(), 'uid2-output-file-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
const fresh = (): string => {
  const d = join(dir, `case${++n}`);
  mkdirSync(d);
  return d;
};

/** The pid of a process that has ended: a short child, waited for. */
function deadPid(): number {
  const r = spawnSync(process.execPath, ['-e', '0']);
  return r.pid as number;
}

describe('symlinked outputs are written through to their target', () => {
  it('leaves the link a link and writes the file it points at', async () => {
    const d = fresh();
    const real = join(d, 'real.csv');
    writeFileSync(real, 'old\n');
    const link = join(d, 'link.csv');
    symlinkSync('real.csv', link);
    const sink = await openSink({ path: link, format: 'csv', header: ['a'] });
    await sink.writeRows([['1']]);
    await sink.commit();
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    expect(readFileSync(real, 'utf8')).toBe('a\n1\n');
    expect(readdirSync(d).filter((f) => f.endsWith('.tmp'))).toEqual([]);
  });

  it('follows a dangling link and a chain of links to where the file will be', () => {
    const d = fresh();
    symlinkSync(join(d, 'b.csv'), join(d, 'a.csv'));
    symlinkSync('c.csv', join(d, 'b.csv'));
    expect(writeThroughTarget(join(d, 'a.csv'))).toBe(join(d, 'c.csv'));
    expect(writeThroughTarget(join(d, 'plain.csv'))).toBe(join(d, 'plain.csv'));
  });

  it('writes a summary through its link too', async () => {
    const d = fresh();
    symlinkSync('summary-real.json', join(d, 'summary.json'));
    await writeTextAtomically(join(d, 'summary.json'), '{}\n');
    expect(lstatSync(join(d, 'summary.json')).isSymbolicLink()).toBe(true);
    expect(readFileSync(join(d, 'summary-real.json'), 'utf8')).toBe('{}\n');
  });
});

describe('temp files', () => {
  it('are created 0600 while the output is written, and the output gets the usual mode', async () => {
    const d = fresh();
    const out = join(d, 'out.csv');
    const sink = await openSink({ path: out, format: 'csv', header: ['email'] });
    await sink.writeRows([['someone@example.com']]);
    const temps = readdirSync(d).filter((f) => f.endsWith('.tmp'));
    expect(temps).toEqual([`.out.csv.${process.pid}.tmp`]);
    expect(statSync(join(d, temps[0])).mode & 0o777).toBe(0o600);
    await sink.commit();
    expect(statSync(out).mode & 0o777).toBe(0o666 & ~process.umask());
  });

  it('are private for a Parquet output too, and a symlinked Parquet path is written through', async () => {
    const d = fresh();
    symlinkSync('real.parquet', join(d, 'out.parquet'));
    const sink = await openSink({ path: join(d, 'out.parquet'), format: 'parquet', header: ['email'] });
    await sink.writeRows([['someone@example.com']]);
    const temps = readdirSync(d).filter((f) => f.endsWith('.tmp'));
    expect(temps).toEqual([`.real.parquet.${process.pid}.tmp`]);
    expect(statSync(join(d, temps[0])).mode & 0o777).toBe(0o600);
    await sink.commit();
    expect(lstatSync(join(d, 'out.parquet')).isSymbolicLink()).toBe(true);
    expect(statSync(join(d, 'real.parquet')).mode & 0o777).toBe(0o666 & ~process.umask());
  });

  it('keep the mode an existing output was given', async () => {
    const d = fresh();
    const out = join(d, 'out.csv');
    writeFileSync(out, 'x\n');
    chmodSync(out, 0o640);
    const sink = await openSink({ path: out, format: 'csv', header: ['a'] });
    await sink.commit();
    expect(statSync(out).mode & 0o777).toBe(0o640);
  });

  it('of dead processes are removed by the next run writing any output in that directory; others are left alone', async () => {
    const d = fresh();
    const dead = deadPid();
    const live = process.ppid;
    // a killed run of yesterday's dated name leaves its rows beside today's output
    const stale = [
      `.out.csv.${dead}.tmp`,
      `.out.csv.${dead}.1a2b3c4d.tmp`,
      `.changes-2026-11-26.csv.${dead}.tmp`,
      `.remap.json.${dead}.5e6f7a8b.tmp`,
    ];
    const kept = [
      `.out.csv.${live}.tmp`,
      `.other.csv.${live}.tmp`,
      // a live writer's summary temp whose random part happens to be all digits
      `.report.2026.${live}.12345678.tmp`,
      // not this tool's pattern
      `.other.csv.tmp`,
      `other.csv.${dead}.tmp`,
      `.other.csv.${dead}.partial`,
      `.other.csv.x${dead}.tmp`,
    ];
    for (const name of [...stale, ...kept]) writeFileSync(join(d, name), 'raw@example.com\n');
    mkdirSync(join(d, `.a-directory.${dead}.tmp`));
    const sink = await openSink({ path: join(d, 'out.csv'), format: 'csv', header: ['a'] });
    await sink.commit();
    const left = readdirSync(d).sort();
    expect(left).toEqual([...kept, `.a-directory.${dead}.tmp`, 'out.csv'].sort());
  });

  it('removeStaleTemps says what it removed', () => {
    const d = fresh();
    const dead = deadPid();
    writeFileSync(join(d, `.s.json.${dead}.tmp`), '');
    writeFileSync(join(d, `.t.csv.${dead}.tmp`), '');
    expect(removeStaleTemps(join(d, 's.json')).sort()).toEqual([`.s.json.${dead}.tmp`, `.t.csv.${dead}.tmp`]);
  });
});

describe('file identity', () => {
  it('is the same through a symlink, a hard link, a relative path, and for a file not there yet', () => {
    const d = fresh();
    const a = join(d, 'a.csv');
    writeFileSync(a, 'x\n');
    symlinkSync('a.csv', join(d, 'sym.csv'));
    linkSync(a, join(d, 'hard.csv'));
    expect(sameFile(fileIdentity(a), fileIdentity(join(d, 'sym.csv')))).toBe(true);
    expect(sameFile(fileIdentity(a), fileIdentity(join(d, 'hard.csv')))).toBe(true);
    expect(sameFile(fileIdentity(a), fileIdentity(`${d}/./a.csv`))).toBe(true);
    expect(sameFile(fileIdentity(join(d, 'new.csv')), fileIdentity(join(d, './new.csv')))).toBe(true);
    expect(sameFile(fileIdentity(a), fileIdentity(join(d, 'new.csv')))).toBe(false);
  });
});
