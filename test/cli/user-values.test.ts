import { describe, expect, it } from 'vitest';
import { clipErrorLine, clipUserValue, quoted } from '../../src/cli/shared/user-values.js';
import { commandWordsIn, summaryJsonPathIn } from '../../src/cli/shared/summary-outcome.js';

describe('user values in error lines', () => {
  it('quotes short values as they are and cuts long ones, saying how long they were', () => {
    expect(quoted('email')).toBe("'email'");
    const long = 'a'.repeat(20_000);
    const q = quoted(long);
    expect(q).toBe(`'${'a'.repeat(80)}…' (20,000 characters)`);
  });

  it('escapes control characters so a binary value cannot break the line or drive the terminal', () => {
    expect(clipUserValue('a\nb\u001b[2Jc\u0000')).toBe('a\\nb\\u001b[2Jc\\u0000');
  });

  it('clips every quoted value of a finished line, and the line itself', () => {
    const line = `no column '${'x'.repeat(5_000)}' in 'in.csv'`;
    expect(clipErrorLine(line)).toBe(`no column '${'x'.repeat(80)}…' (5,000 characters) in 'in.csv'`);
    expect(Array.from(clipErrorLine('y'.repeat(50_000))).length).toBeLessThan(1_100);
  });
});

describe('the --summary-json of a command line', () => {
  it('is found in the raw arguments, in both spellings, up to --', () => {
    expect(summaryJsonPathIn(['map', 'in.csv', '--summary-json', 's.json'])).toBe('s.json');
    expect(summaryJsonPathIn(['map', '--summary-json=s.json', 'in.csv'])).toBe('s.json');
    expect(summaryJsonPathIn(['map', 'in.csv', '--summary-json'])).toBeUndefined();
    expect(summaryJsonPathIn(['map', '--', '--summary-json', 's.json'])).toBeUndefined();
  });

  it('names the command, with the token subcommand', () => {
    expect(commandWordsIn(['--no-color', 'map', 'in.csv', '-o', 'x'])).toBe('map');
    expect(commandWordsIn(['token', 'generate', '--input', 'x'])).toBe('token generate');
    // the program's own value flag before the command: its value is not the command
    expect(commandWordsIn(['--log-format', 'json', 'remap-due', '--state', 's.db'])).toBe('remap-due');
    expect(commandWordsIn(['--log-format=json', 'map', 'in.csv'])).toBe('map');
  });
});
