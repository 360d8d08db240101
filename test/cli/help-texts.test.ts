import { Command } from 'commander';
import { beforeAll, describe, expect, it } from 'vitest';
import { registerCommands } from '../../src/cli/commands.js';

// What --help says about exit codes and formats matches what the commands do (README "Exit codes").
let program: Command;

beforeAll(async () => {
  program = new Command('uid2-batch').exitOverride();
  await registerCommands(program);
});

/** The whole help of a command path (`['token', 'generate']`), with the text added after it. */
function help(path: readonly string[]): string {
  let cmd = program;
  for (const name of path) {
    const next = cmd.commands.find((c) => c.name() === name);
    if (next === undefined) throw new Error(`no command ${path.join(' ')}`);
    cmd = next;
  }
  let text = '';
  cmd.configureOutput({ writeOut: (s) => (text += s), writeErr: (s) => (text += s) });
  cmd.outputHelp();
  return text;
}

/** The codes listed after "Exit codes:" (each a number at the start of a list item). */
function exitCodes(text: string): number[] {
  const at = text.indexOf('Exit codes:');
  expect(at, 'the help lists its exit codes').toBeGreaterThan(-1);
  const list = text.slice(at + 'Exit codes:'.length).replace(/\s+/g, ' ');
  return [...list.matchAll(/(?:^|[;:] ?| )(\d{1,3}) (?=[a-z(])/g)].map((m) => Number(m[1]));
}

describe('exit codes in --help', () => {
  it('token generate: an opted-out user is exit 5, not 0', () => {
    const text = help(['token', 'generate']);
    expect(text).not.toMatch(/opted-out user[^.]*exits 0/);
    expect(text).toMatch(/exits? 5|5 (the user |this user )?opted out|5 optout/);
    expect(exitCodes(text)).toContain(5);
  });

  it.each([['map'], ['hash'], ['optout-check']])('%s lists 1 (failed) and 9 (records skipped)', (name) => {
    const codes = exitCodes(help([name]));
    expect(codes).toContain(1);
    expect(codes).toContain(9);
  });

  it.each(['remap-due', 'migrate', 'token generate'])('%s lists 1 (failed)', (path) => {
    expect(exitCodes(help(path.split(' ')))).toContain(1);
  });
});

describe('formats in --help', () => {
  it.each([['map'], ['hash'], ['optout-check']])('%s names Parquet among its inputs and outputs', (name) => {
    const cmd = program.commands.find((c) => c.name() === name) as Command;
    expect(`${cmd.summary()} ${cmd.description()}`).toMatch(/Parquet/);
  });
});
