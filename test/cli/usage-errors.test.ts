import { describe, expect, it } from 'vitest';
import { usageErrorLine } from '../../src/cli/shared/usage-errors.js';

// commander's own error lines echo what the user typed: they are quoted as every other error line is.

const SECRET = 'Sup3rS3cretValue';

describe("commander's error lines", () => {
  it('never show the value of a secret-looking flag, given with = or after it', () => {
    const withEquals = usageErrorLine(`error: unknown option '--client_secret_x=${SECRET}'`, [
      'map',
      `--client_secret_x=${SECRET}`,
    ]);
    expect(withEquals).toBe("error: unknown option '--client_secret_x=<hidden>'");
    const apart = usageErrorLine(`error: option '--token-x <t>' argument '${SECRET}' is invalid.`, [
      'map',
      '--token-x',
      SECRET,
    ]);
    expect(apart).not.toContain(SECRET);
    expect(apart).toContain("'<hidden>'");
    // the same text typed earlier as an operand stays hidden too
    expect(usageErrorLine(`error: unknown command '${SECRET}'`, [SECRET, `--client_key=${SECRET}`])).toBe(
      "error: unknown command '<hidden>'",
    );
    for (const name of ['--my-password', '--auth_token', '--SECRET', '--private-key']) {
      const line = usageErrorLine(`error: unknown option '${name}=${SECRET}'`, [`${name}=${SECRET}`]);
      expect(line).not.toContain(SECRET);
    }
  });

  it('escape control characters and cut a long value to 80 characters', () => {
    const value = 'x\u001b[31mred\u0007';
    const line = usageErrorLine(`error: option '--format <format>' argument '${value}' is invalid.`, [
      'map',
      '--format',
      value,
    ]);
    expect(line).toBe("error: option '--format <format>' argument 'x\\u001b[31mred\\u0007' is invalid.");
    const long = `--${'y'.repeat(5_000)}`;
    const cut = usageErrorLine(`error: unknown option '${long}'`, [long]);
    expect(cut).toBe(`error: unknown option '${long.slice(0, 80)}…' (5,002 characters)`);
  });

  it('quote a value holding a quote or a line break as one value', () => {
    const arg = "--it's\nodd";
    expect(usageErrorLine(`error: unknown option '${arg}'`, [arg])).toBe("error: unknown option '--it's\\nodd'");
  });

  it('keep the file names of operands and file flags, which are no secrets', () => {
    expect(usageErrorLine("error: unknown option '--apikey_file=/k'", ['--apikey_file=/k'])).toBe(
      "error: unknown option '--apikey_file=/k'",
    );
    expect(usageErrorLine("error: too many arguments for 'state'. Expected 0 arguments but got 1.", ['x'])).toBe(
      "error: too many arguments for 'state'. Expected 0 arguments but got 1.",
    );
  });
});
