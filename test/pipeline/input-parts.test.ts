import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { expandInputs, globMatcher, InputPartsError } from '../../src/pipeline/io/input-parts.js';
import { tempDir } from '../helpers/map-e2e-data.js';

const dir = tempDir('parts');
afterAll(() => dir.remove());

function failure(run: () => unknown): InputPartsError {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(InputPartsError);
    return err as InputPartsError;
  }
  throw new Error('expected an InputPartsError');
}

describe('globMatcher', () => {
  it('matches *, ? and sets as a shell does', () => {
    const m = globMatcher('part-*.csv.gz');
    expect(m('part-00000.csv.gz')).toBe(true);
    expect(m('part-.csv.gz')).toBe(true);
    expect(m('part-1.csv')).toBe(false);
    expect(m('xpart-1.csv.gz')).toBe(false);
    expect(globMatcher('data_?_0.csv')('data_3_0.csv')).toBe(true);
    expect(globMatcher('data_?_0.csv')('data_13_0.csv')).toBe(false);
    expect(globMatcher('p[0-2].csv')('p1.csv')).toBe(true);
    expect(globMatcher('p[0-2].csv')('p3.csv')).toBe(false);
    expect(globMatcher('p[!0-2].csv')('p3.csv')).toBe(true);
    expect(globMatcher('p[^0-2].csv')('p1.csv')).toBe(false);
    expect(globMatcher('p[ab].csv')('pb.csv')).toBe(true);
  });

  it('keeps regex characters and an unclosed [ literal, and leaves dot files to dot patterns', () => {
    expect(globMatcher('a+b(1).csv')('a+b(1).csv')).toBe(true);
    expect(globMatcher('a+b(1).csv')('aab(1)xcsv')).toBe(false);
    expect(globMatcher('x[1.csv')('x[1.csv')).toBe(true);
    expect(globMatcher('*.csv')('.hidden.csv')).toBe(false);
    expect(globMatcher('.*.csv')('.hidden.csv')).toBe(true);
    expect(globMatcher('[.]*.csv')('.hidden.csv')).toBe(false);
  });

  it('reads only shell syntax: groups, braces, extglobs, a leading ! and backslashes are text', () => {
    expect(globMatcher('export (*).csv')('export (1).csv')).toBe(true);
    expect(globMatcher('export (*).csv')('export 1.csv')).toBe(false);
    expect(globMatcher('a{b,c}*')('a{b,c}1')).toBe(true);
    expect(globMatcher('a{b,c}*')('ab1')).toBe(false);
    expect(globMatcher('@(a)*')('@(a)x')).toBe(true);
    expect(globMatcher('!x*')('!xa')).toBe(true);
    expect(globMatcher('a|b*')('a|bc')).toBe(true);
    expect(globMatcher('{\\\\\\\\*')('{\\\\\\\\1')).toBe(true);
    expect(globMatcher('p[z-a]*')('pq')).toBe(false);
  });
});

describe('expandInputs', () => {
  const exp = dir.file('export');
  mkdirSync(exp);
  for (const name of ['part-2.csv', 'part-0.csv', 'part-1.csv', '_SUCCESS', '.crc', 'notes.txt'])
    dir.file(join('export', name), 'id,email\n');
  mkdirSync(join(exp, 'sub'));

  it('keeps files in the order given and lists a directory sorted, without hidden or marker files', () => {
    const a = dir.file('a.csv', 'id\n');
    const b = dir.file('b.csv', 'id\n');
    expect(expandInputs([b, a])).toEqual([b, a]);
    expect(expandInputs([exp])).toEqual(
      ['notes.txt', 'part-0.csv', 'part-1.csv', 'part-2.csv'].map((n) => join(exp, n)),
    );
  });

  it('expands a wildcard in the last path part, sorted', () => {
    expect(expandInputs([join(exp, 'part-*.csv')])).toEqual(
      ['part-0.csv', 'part-1.csv', 'part-2.csv'].map((n) => join(exp, n)),
    );
  });

  it('a pattern matching nothing is one clear error naming it', () => {
    const err = failure(() => expandInputs([join(exp, 'part-*.parquet')]));
    expect(err.message).toContain("matches no file in '");
    expect(err.message).toContain('part-*.parquet');
  });

  it('refuses a wildcard in a directory part, stdin with files, and a file given twice', () => {
    expect(failure(() => expandInputs([join(dir.path, 'ex*', 'part-0.csv')])).message).toContain('last part');
    expect(failure(() => expandInputs(['-', join(exp, 'part-0.csv')])).message).toContain('stdin');
    expect(failure(() => expandInputs([join(exp, 'part-0.csv'), join(exp, 'part-*.csv')])).message).toContain(
      'given twice',
    );
  });

  it('passes a missing plain path and stdin on, for opening to report', () => {
    expect(expandInputs([join(dir.path, 'missing.csv')])).toEqual([join(dir.path, 'missing.csv')]);
    expect(expandInputs(['-'])).toEqual(['-']);
  });

  it('an empty directory is an error', () => {
    const empty = dir.file('empty');
    mkdirSync(empty);
    expect(failure(() => expandInputs([empty])).message).toContain('holds no file');
  });
});
