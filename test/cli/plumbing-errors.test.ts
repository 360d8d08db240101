import { EventEmitter } from 'node:events';
import { Command, CommanderError } from 'commander';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/index.js';
import { EXIT, UserError, onInterrupt, type InterruptTarget } from '../../src/cli/shared/exit-codes.js';
import { buildProgram, describeError, endQuietlyOnBrokenPipe, reportError } from '../../src/cli/main.js';
import { addConnectionOptions, addOutputOptions, parseConcurrency } from '../../src/cli/shared/options.js';
import { collectRepeated, refuseRepeatedFlags } from '../../src/cli/shared/repeated-flags.js';
import { ClockSkewError, ServerError, UnauthorizedError, errorFromResponse } from '../../src/protocol/index.js';
import { InputError } from '../../src/pipeline/io/table.js';
import { delimiterFlag } from '../../src/cli/shared/input-options.js';

function capture() {
  const lines: string[] = [];
  return { stream: { write: (s: string) => lines.push(s) }, lines, text: () => lines.join('') };
}

function named(name: string, message: string, extra: Record<string, unknown> = {}): Error {
  return Object.assign(new Error(message), { name }, extra);
}

describe('reportError', () => {
  it('prints one line and exit 2 for user and config errors', () => {
    for (const err of [
      new UserError('--concurrency must be a whole number from 1 to 20'),
      new ConfigError('no API key for prod: set UID2_API_KEY'),
    ]) {
      const out = capture();
      expect(reportError(err, out.stream, {})).toBe(EXIT.usage);
      expect(out.lines).toEqual([`uid2-batch: ${err.message}\n`]);
    }
    const out = capture();
    expect(reportError(new UserError('partial', EXIT.partial), out.stream, {})).toBe(3);
  });

  it('exits 2 on commander usage errors without printing again, 0 on --help/--version', () => {
    const out = capture();
    expect(
      reportError(new CommanderError(1, 'commander.unknownOption', "error: unknown option '--x'"), out.stream, {}),
    ).toBe(EXIT.usage);
    expect(reportError(new CommanderError(0, 'commander.helpDisplayed', '(outputHelp)'), out.stream, {})).toBe(EXIT.ok);
    expect(out.lines).toEqual([]);
  });

  it('exits 4 on a 401 and points at the key, the environment and the role', () => {
    const out = capture();
    expect(reportError(errorFromResponse(401, '{"status":"unauthorized"}'), out.stream, {})).toBe(EXIT.auth);
    expect(out.text()).toBe(
      "uid2-batch: the service refused the API key (401): check UID2_API_KEY, the environment (integ and prod keys differ) and the key's role\n",
    );
    expect(reportError(new UnauthorizedError(401, 'unauthorized', undefined), capture().stream, {})).toBe(4);
  });

  it('exits 1 with a clock skew message', () => {
    const out = capture();
    const err = errorFromResponse(
      400,
      '{"status":"client_error","message":"Invalid timestamp: request too old or client time drift"}',
    );
    expect(err).toBeInstanceOf(ClockSkewError);
    expect(reportError(err, out.stream, {})).toBe(EXIT.failed);
    expect(out.text()).toMatch(/^uid2-batch: clock skew/);
    const bare = capture();
    reportError(new ClockSkewError(400, 'client_error', 'Invalid timestamp'), bare.stream, {});
    expect(bare.text()).toMatch(/^uid2-batch: clock skew/);
  });

  it('exits 2 on the state errors the user must fix, using their userMessage', () => {
    for (const name of ['StateEnvMismatchError', 'StateLockedError', 'StateNotFoundError', 'StateFormatError']) {
      const out = capture();
      expect(reportError(named(name, 'internal', { userMessage: `${name} says what to do` }), out.stream, {})).toBe(
        EXIT.usage,
      );
      expect(out.text()).toBe(`uid2-batch: ${name} says what to do\n`);
    }
    expect(describeError(named('StateLockedError', 'state.db is in use by another run')).line).toBe(
      'state.db is in use by another run',
    );
  });

  it('takes userMessage and a valid exitCode from other named errors', () => {
    expect(describeError(named('SomethingError', 'x', { userMessage: 'fix this', exitCode: 3 }))).toEqual({
      line: 'fix this',
      exitCode: 3,
    });
    expect(describeError(named('SomethingError', 'x', { userMessage: 'fix this', exitCode: 77 }))).toEqual({
      line: 'fix this',
      exitCode: 1,
    });
  });

  it('exits 1 on service answers after retries and on input errors', () => {
    expect(describeError(new ServerError(503, 'server_error', 'down'))).toMatchObject({
      exitCode: 1,
      line: 'server_error (HTTP 503): down',
    });
    const input = new InputError('in.csv', 12, 'unbalanced quote', 'close the quote');
    expect(describeError(input)).toEqual({ line: input.message, exitCode: 1 });
    expect(input.message).toContain('in.csv');
  });

  it('names the file for file-system errors', () => {
    const err = Object.assign(new Error("ENOENT: no such file or directory, open 'in.csv'"), {
      code: 'ENOENT',
      path: 'in.csv',
    });
    expect(describeError(err)).toEqual({ line: 'cannot use in.csv: no such file or directory', exitCode: EXIT.usage });
  });

  it('ends quietly with 0 on EPIPE', () => {
    const out = capture();
    expect(reportError(Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }), out.stream, {})).toBe(0);
    expect(out.lines).toEqual([]);
  });

  it('prints a stack trace only with UID2_DEBUG', () => {
    const plain = capture();
    expect(reportError(new Error('boom'), plain.stream, {})).toBe(EXIT.failed);
    expect(plain.text()).toBe('uid2-batch: boom (set UID2_DEBUG=1 for details)\n');
    const debug = capture();
    reportError(new Error('boom'), debug.stream, { UID2_DEBUG: '1' });
    expect(debug.lines).toHaveLength(2);
    expect(debug.lines[1]).toContain('plumbing-errors.test.ts');
    expect(capture().lines).toEqual([]);
    const userErr = capture();
    reportError(new UserError('bad'), userErr.stream, {});
    expect(userErr.text()).not.toContain(' at ');
  });
});

describe('broken pipe', () => {
  it('exits 0 on EPIPE and reports other stdout errors', () => {
    const stdout = new EventEmitter();
    const codes: number[] = [];
    endQuietlyOnBrokenPipe(stdout as never, (c) => codes.push(c));
    stdout.emit('error', Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }));
    expect(codes).toEqual([0]);
  });

  it('leaves a terminal that went away (EIO) to the SIGHUP that comes with it', () => {
    const stdout = new EventEmitter();
    const codes: number[] = [];
    endQuietlyOnBrokenPipe(stdout as never, (c) => codes.push(c));
    stdout.emit('error', Object.assign(new Error('write EIO'), { code: 'EIO' }));
    expect(codes).toEqual([]);
    stdout.emit('error', Object.assign(new Error('write ENOSPC'), { code: 'ENOSPC' }));
    expect(codes).toEqual([1]);
  });
});

class FakeProcess extends EventEmitter implements InterruptTarget {
  exitCode: number | undefined;
  exits: number[] = [];
  written: string[] = [];
  stderr = { write: (s: string) => this.written.push(s) };
  exit(code: number): void {
    this.exits.push(code);
  }
}

describe('onInterrupt', () => {
  it('runs the handler once, sets 130, and exits 130 on a second signal', () => {
    const proc = new FakeProcess();
    const seen: string[] = [];
    onInterrupt((s) => seen.push(s), proc);
    proc.emit('SIGINT', 'SIGINT');
    expect(seen).toEqual(['SIGINT']);
    expect(proc.exitCode).toBe(130);
    expect(proc.exits).toEqual([]);
    expect(proc.written.join('')).toContain('Ctrl-C again');
    proc.emit('SIGTERM', 'SIGTERM');
    expect(seen).toEqual(['SIGINT']);
    expect(proc.exits).toEqual([130]);
  });

  it('ends a hangup (SIGHUP) with 129, and SIGTERM as Ctrl-C with 130', () => {
    const hup = new FakeProcess();
    const seen: string[] = [];
    onInterrupt((s) => seen.push(s), hup);
    hup.emit('SIGHUP', 'SIGHUP');
    expect(seen).toEqual(['SIGHUP']);
    expect(hup.exitCode).toBe(129);
    hup.emit('SIGINT', 'SIGINT');
    expect(hup.exits).toEqual([129]);
    const term = new FakeProcess();
    onInterrupt(() => {}, term);
    term.emit('SIGTERM', 'SIGTERM');
    expect(term.exitCode).toBe(130);
  });

  it('removes its listeners when disposed', () => {
    const proc = new FakeProcess();
    const dispose = onInterrupt(() => {}, proc);
    expect(proc.listenerCount('SIGINT')).toBe(1);
    dispose();
    expect(proc.listenerCount('SIGINT')).toBe(0);
    expect(proc.listenerCount('SIGTERM')).toBe(0);
    expect(proc.listenerCount('SIGHUP')).toBe(0);
  });
});

describe('options through commander', () => {
  async function probe(): Promise<{ program: Command; seen: Record<string, unknown>[] }> {
    const seen: Record<string, unknown>[] = [];
    // the root alone: the probe command stands in for the real ones
    const program = await buildProgram([]);
    program.configureOutput({ writeErr: () => {}, writeOut: () => {} });
    const cmd = program.command('plumbing-probe').option('--concurrency <n>', 'requests in flight', parseConcurrency);
    addOutputOptions(addConnectionOptions(cmd))
      .exitOverride()
      .action((opts: Record<string, unknown>) => {
        seen.push(opts);
      });
    return { program, seen };
  }

  it('refuses a bad number with the one line the user needs', async () => {
    const { program } = await probe();
    const err = await program
      .parseAsync(['node', 'uid2-batch', 'plumbing-probe', '--concurrency', '0'])
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UserError);
    expect((err as Error).message).toBe("--concurrency must be a whole number from 1 to 20 (got '0')");
    expect(describeError(err).exitCode).toBe(EXIT.usage);
  });

  it('spells every shared option the same and sets NO_COLOR for --no-color', async () => {
    const saved = process.env.NO_COLOR;
    delete process.env.NO_COLOR;
    try {
      const { program, seen } = await probe();
      await program.parseAsync([
        'node',
        'uid2-batch',
        'plumbing-probe',
        '--env',
        'prod',
        '--base-url',
        'https://x.example',
        '--api-key-file',
        '/k',
        '--client-secret-file',
        '/s',
        '--timeout-ms',
        '5000',
        '--max-attempts',
        '3',
        '-o',
        'out.csv',
        '--format',
        'jsonl',
        '--summary-json',
        's.json',
        '--quiet',
        '--insecure-http',
        '--no-color',
      ]);
      expect(seen[0]).toMatchObject({
        env: 'prod',
        baseUrl: 'https://x.example',
        apiKeyFile: '/k',
        clientSecretFile: '/s',
        timeoutMs: 5000,
        maxAttempts: 3,
        output: 'out.csv',
        format: 'jsonl',
        summaryJson: 's.json',
        quiet: true,
        insecureHttp: true,
      });
      expect(process.env.NO_COLOR).toBe('1');
    } finally {
      if (saved === undefined) delete process.env.NO_COLOR;
      else process.env.NO_COLOR = saved;
    }
  });

  it('refuses an unknown --format', async () => {
    const { program } = await probe();
    const err = await program
      .parseAsync(['node', 'uid2-batch', 'plumbing-probe', '--format', 'xml'])
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CommanderError);
    expect(describeError(err).exitCode).toBe(EXIT.usage);
  });
});

describe('flags given twice', () => {
  async function parseError(args: string[]): Promise<unknown> {
    const program = await buildProgram();
    program.configureOutput({ writeErr: () => {}, writeOut: () => {} });
    return program.parseAsync(['node', 'uid2-batch', ...args]).then(
      () => undefined,
      (e: unknown) => e,
    );
  }

  it('refuses a one-value flag given twice with two values, naming both, before any file is opened', async () => {
    const err = await parseError(['hash', 'no-such-input.csv', '--col', 'email', '--col', 'id']);
    expect(err).toBeInstanceOf(UserError);
    expect(describeError(err)).toEqual({
      line: "--col was given twice ('email', then 'id'); it takes one value: give it once; for several identifier columns, name each with --email-col, --phone-col, --email-hash-col or --phone-hash-col (those repeat)",
      exitCode: EXIT.usage,
    });
    const env = await parseError(['remap-due', '--env', 'local', '--env=integ']);
    expect((env as Error).message).toMatch(/^--env was given twice \('local', then 'integ'\)/);
  });

  it('lets repeatable flags repeat, and the same value twice through', async () => {
    const err = await parseError([
      'hash',
      'no-such-input.csv',
      '--email-col',
      'a',
      '--email-col',
      'b',
      '--format',
      'csv',
      '--format',
      'csv',
      '-o',
      'x.csv',
      '-o',
      'y.csv',
    ]);
    expect((err as Error).message).toMatch(/^--output was given twice \('x\.csv', then 'y\.csv'\)/);
  });

  it('keeps every value of a repeatable flag', async () => {
    const program = new Command('t').exitOverride();
    const seen: Record<string, unknown>[] = [];
    program
      .option('--col <name>', 'repeatable', collectRepeated)
      .option('--one <v>', 'one value')
      .action((opts: Record<string, unknown>) => {
        seen.push(opts);
      });
    refuseRepeatedFlags(program);
    await program.parseAsync(['node', 't', '--col', 'a', '--col', 'b', '--one', 'x']);
    expect(seen[0]).toEqual({ col: ['a', 'b'], one: 'x' });
  });

  it('clips a long value in the refusal', async () => {
    const long = 'x'.repeat(20_000);
    const err = await parseError(['hash', 'in.csv', '--col', long, '--col', 'b']);
    const line = describeError(err).line ?? '';
    expect(line.length).toBeLessThan(400);
    expect(line).toContain('(20,000 characters)');
  });
});

describe('usage errors are exit 2 in every command that reads a table', () => {
  it.each(['map', 'hash', 'optout-check'])(
    "%s --delimiter ';;' is refused while the flags are read",
    async (command) => {
      const program = await buildProgram();
      program.configureOutput({ writeErr: () => {}, writeOut: () => {} });
      const err = await program
        .parseAsync(['node', 'uid2-batch', command, 'no-such-file.csv', '--delimiter', ';;'])
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(describeError(err)).toEqual({
        line: `--delimiter must be one character other than a quote or a line break (got ';;'): e.g. --delimiter ";" or --delimiter tab`,
        exitCode: EXIT.usage,
      });
    },
  );

  it('--delimiter tab, or \\t, is read as the tab the readers are handed; one character stays as it is', () => {
    expect(delimiterFlag('tab')).toBe('\t');
    expect(delimiterFlag('TAB')).toBe('\t');
    expect(delimiterFlag('\\t')).toBe('\t');
    expect(delimiterFlag(';')).toBe(';');
  });

  it('lists one code per meaning: no two names share a number', () => {
    const codes = Object.values(EXIT);
    expect(new Set(codes).size).toBe(codes.length);
    expect(EXIT).toMatchObject({
      ok: 0,
      failed: 1,
      usage: 2,
      partial: 3,
      auth: 4,
      optout: 5,
      invalidToken: 6,
      hangup: 129,
      interrupted: 130,
    });
  });
});
