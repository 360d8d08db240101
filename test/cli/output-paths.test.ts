import { linkSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { refuseOverlappingPaths, standardOutputs } from '../../src/cli/shared/output-paths.js';
import { describeError } from '../../src/cli/main.js';

const dir = mkdtempSync(join(tmpdir(), 'uid2-output-paths-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const input = join(dir, 'in.csv');
writeFileSync(input, 'email\na@example.com\n');
symlinkSync('in.csv', join(dir, 'in-link.csv'));
linkSync(input, join(dir, 'in-hard.csv'));

function refusal(fn: () => void): { line: string; exitCode: number } {
  try {
    fn();
  } catch (err) {
    const d = describeError(err);
    return { line: d.line ?? '', exitCode: d.exitCode };
  }
  throw new Error('expected a refusal');
}

describe('refuseOverlappingPaths', () => {
  it('refuses an output that is the input, by path, symlink, hard link or another spelling', () => {
    for (const out of [
      input,
      join(dir, 'in-link.csv'),
      join(dir, 'in-hard.csv'),
      `${dir}/../${dir.split('/').pop()}/in.csv`,
    ]) {
      const r = refusal(() =>
        refuseOverlappingPaths([{ flag: 'the input', path: input }], [{ flag: '-o', path: out }]),
      );
      expect(r.exitCode).toBe(2);
      expect(r.line).toMatch(
        /^-o '.*' is the same file as the input '.*in\.csv': the run would overwrite what it reads/,
      );
    }
  });

  it('refuses two outputs in one file, even one not there yet', () => {
    const out = join(dir, 'out.csv');
    const r = refusal(() =>
      refuseOverlappingPaths(
        [{ flag: 'the input', path: input }],
        [
          { flag: '-o', path: out },
          { flag: '--rejects', path: out },
        ],
      ),
    );
    expect(r.exitCode).toBe(2);
    expect(r.line).toContain("--rejects '");
    expect(r.line).toContain('give each output its own file');
  });

  it('refuses a --summary-json that is the state file', () => {
    const state = join(dir, 's.db');
    writeFileSync(state, '');
    const r = refusal(() =>
      refuseOverlappingPaths(
        [{ flag: '--state', path: state }],
        standardOutputs({ output: join(dir, 'c.csv'), summaryJson: state }),
      ),
    );
    expect(r.line).toMatch(/^--summary-json '.*s\.db' is the same file as --state/);
  });

  it('refuses an output in a directory that does not exist, before anything is read', () => {
    const r = refusal(() => refuseOverlappingPaths([], [{ flag: '-o', path: join(dir, 'no-such-dir', 'out.csv') }]));
    expect(r.exitCode).toBe(2);
    expect(r.line).toContain('does not exist; create it first');
  });

  it('refuses a --summary-json that exists and is not a summary: a CSV, an unrelated JSON, a JSON array', () => {
    const files = {
      'other.csv': 'email\nb@example.com\n',
      'package.json': '{"name":"x","version":"1.0.0"}',
      'list.json': '[{"command":"map"}]',
    };
    for (const [name, content] of Object.entries(files)) {
      const path = join(dir, name);
      writeFileSync(path, content);
      const r = refusal(() =>
        refuseOverlappingPaths([{ flag: 'the input', path: input }], standardOutputs({ summaryJson: path })),
      );
      expect(r.exitCode).toBe(2);
      expect(r.line).toMatch(
        /^--summary-json '.*' exists and is not a run summary: .*choose another --summary-json path/,
      );
    }
  });

  it('lets --summary-json replace an earlier summary, or an empty file (mktemp)', () => {
    const earlier = join(dir, 'earlier.json');
    writeFileSync(earlier, JSON.stringify({ command: 'remap-due', outcome: 'completed', exit_code: 0 }));
    const empty = join(dir, 'empty.json');
    writeFileSync(empty, '');
    for (const path of [earlier, empty])
      expect(() => refuseOverlappingPaths([], standardOutputs({ summaryJson: path }))).not.toThrow();
  });

  it('lets distinct files, stdout and stdin through', () => {
    expect(() =>
      refuseOverlappingPaths(
        [
          { flag: 'the input', path: '-' },
          { flag: '--state', path: undefined },
        ],
        [
          { flag: '-o', path: '-' },
          { flag: '--rejects', path: join(dir, 'rejects.csv') },
          { flag: '--summary-json', path: join(dir, 'summary.json') },
        ],
      ),
    ).not.toThrow();
  });
});
