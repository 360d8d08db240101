import { Command, CommanderError, Option, type OutputConfiguration } from 'commander';
import { ConfigError } from '../config/errors.js';
import { rejectSecretFlags } from '../config/secret-flags.js';
import { COMMANDS, registerCommands } from './commands.js';
import { EXIT, UserError, stoppedBy } from './shared/exit-codes.js';
import { refuseRepeatedFlags } from './shared/repeated-flags.js';
import { usageErrorLine } from './shared/usage-errors.js';
import { installJsonLog, LOG_FORMAT_VARIABLE, LOG_FORMATS, logFormatOf } from './shared/log-format.js';
import { commandWordsIn, flagValueIn } from './shared/raw-args.js';
import { writeLine } from '../pipeline/run/log-lines.js';
import { clipErrorLine } from './shared/user-values.js';
import { releaseYoungGeneration } from '../pipeline/run/young-generation.js';
import { startBenchReport } from '../pipeline/workers/bench-report.js';

/** The program without its commands: its name, version, root options and error behaviour. */
function rootProgram(output?: OutputConfiguration): Command {
  const program = new Command('uid2-batch');
  // before any command is added: commands take the output settings their parent has when they are created
  if (output !== undefined) program.configureOutput(output);
  return program
    .description('Bulk identity mapping, re-mapping, opt-out checks and tokens for the UID2 / EUID identity service')
    .version('0.1.0')
    .option('--no-color', 'no colors and no spinner animation (same as NO_COLOR=1)')
    .addOption(
      new Option(
        '--log-format <format>',
        `stderr as text, or as one JSON object a line for log stores (or ${LOG_FORMAT_VARIABLE}; default text)`,
      ).choices([...LOG_FORMATS]),
    )
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();
}

/**
 * The program with the named commands (all when `commands` is undefined); loads their modules. `output`
 * replaces where commander writes (tests).
 */
export async function buildProgram(commands?: readonly string[], output?: OutputConfiguration): Promise<Command> {
  const program = rootProgram(output);
  program.hook('preAction', (thisCommand, actionCommand) => {
    // One switch for everything that draws (ora, any child process): the NO_COLOR convention.
    if (thisCommand.opts().color === false) process.env.NO_COLOR = '1';
    // only `map` may keep the young generation bounded (it decides once its input is open)
    if (actionCommand.name() !== 'map' || actionCommand.parent !== thisCommand) releaseYoungGeneration();
  });
  await registerCommands(program, commands);
  refuseRepeatedFlags(program);
  return program;
}

/** Thrown by a stand-in command when commander picks it: its name is the command to load. */
class Picked {
  constructor(readonly command: string) {}
}

/**
 * The commands `argv` needs, found by letting commander parse it with a stand-in for every command (a name that
 * takes any options and arguments, and throws Picked when run or asked for its help) and all output dropped:
 * the command commander would run or show the help of (`map ...`, `map --help`, `help map`); none for the
 * version, which is the root's own; every command for anything else (the root help lists them all, and a
 * usage error is reported by the whole program as before). Commander alone decides, so no rule of its
 * parsing is copied here, and the program then parses `argv` for real exactly as if it held every command.
 */
export async function commandsFor(argv: readonly string[]): Promise<string[] | undefined> {
  const probe = rootProgram({ writeOut: () => {}, writeErr: () => {}, outputError: () => {} });
  for (const { name } of COMMANDS) {
    probe
      .command(name)
      .allowUnknownOption()
      .allowExcessArguments()
      .addHelpText('before', () => {
        throw new Picked(name);
      })
      .action(() => {
        throw new Picked(name);
      });
  }
  try {
    await probe.parseAsync([...argv]);
  } catch (err) {
    if (err instanceof Picked) return [err.command];
    if (err instanceof CommanderError && err.code === 'commander.version') return [];
  }
  return undefined;
}

const UNAUTHORIZED_MESSAGE =
  "the service refused the API key (401): check UID2_API_KEY, the environment (integ and prod keys differ) and the key's role";

/** Errors of src/state that mean "the user must change something": exit 2. Matched by name to keep cli loosely tied. */
const STATE_USER_ERRORS = new Set([
  'StateAccessError',
  'StateEnvMismatchError',
  'StateLockedError',
  'StateNotFoundError',
  'StateFormatError',
  'StateJournalError',
  'StateSettingError',
]);

/** Answers of the service other than 401 and clock skew, after the client's retries: the run failed. */
const SERVICE_ERRORS = new Set([
  'ServiceError',
  'ClientError',
  'ServerError',
  'RateLimitedError',
  'PayloadTooLargeError',
  'InvalidTokenError',
  'ExpiredTokenError',
  'NetworkError',
  'UnexpectedResponseError',
  'MalformedAnswerError',
  'RefreshKeyMismatchError',
  'EnvelopeError',
  'ServiceUnreachableError',
]);

const FILE_PROBLEMS: Readonly<Record<string, string>> = {
  ENOENT: 'no such file or directory',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  EISDIR: 'it is a directory',
  ENOTDIR: 'a part of the path is not a directory',
  ENOSPC: 'no space left on the device',
  EROFS: 'read-only file system',
};

interface ErrorFields {
  name: string;
  message: string;
  code?: string;
  path?: string;
  userMessage?: string;
  exitCode?: number;
  stack?: string;
}

function fieldsOf(err: unknown): ErrorFields {
  if (!(err instanceof Error)) return { name: 'Error', message: String(err) };
  const o = err as Error & Record<string, unknown>;
  return {
    name: err.name,
    message: err.message,
    ...(typeof o.code === 'string' ? { code: o.code } : {}),
    ...(typeof o.path === 'string' ? { path: o.path } : {}),
    ...(typeof o.userMessage === 'string' ? { userMessage: o.userMessage } : {}),
    ...(typeof o.exitCode === 'number' ? { exitCode: o.exitCode } : {}),
    ...(err.stack ? { stack: err.stack } : {}),
  };
}

/** A write to a closed pipe (`uid2-batch map ... | head`): the reader has what it wanted. */
export function isBrokenPipe(err: unknown): boolean {
  return fieldsOf(err).code === 'EPIPE';
}

/** The one line to print and the exit code, for every kind of failure this program knows; user values in it clipped. */
export function describeError(err: unknown): { line?: string; exitCode: number } {
  const described = describeErrorUnclipped(err);
  return described.line === undefined ? described : { ...described, line: clipErrorLine(described.line) };
}

function describeErrorUnclipped(err: unknown): { line?: string; exitCode: number } {
  if (err instanceof CommanderError) {
    // commander has printed its own message (or the help, or the version)
    return { exitCode: err.exitCode === 0 ? EXIT.ok : EXIT.usage };
  }
  const f = fieldsOf(err);
  if (f.code === 'EPIPE') return { exitCode: EXIT.ok };
  if (err instanceof UserError) return { line: err.message, exitCode: err.exitCode };
  if (err instanceof ConfigError) return { line: err.message, exitCode: EXIT.usage };
  switch (f.name) {
    case 'UnauthorizedError':
      return { line: UNAUTHORIZED_MESSAGE, exitCode: EXIT.auth };
    case 'CredentialsRefusedError':
      return { line: f.message, exitCode: EXIT.auth };
    case 'ClockSkewError':
      return { line: /^clock skew/i.test(f.message) ? f.message : `clock skew: ${f.message}`, exitCode: EXIT.failed };
    case 'AbortError':
      return { line: 'interrupted', exitCode: EXIT.interrupted };
    case 'InputError':
    case 'OutputError':
    // a state file that fails its checksums; named so that one revived from the state thread reads the same
    case 'StateDamagedError':
      return { line: f.message, exitCode: EXIT.failed };
  }
  if (STATE_USER_ERRORS.has(f.name)) return { line: f.userMessage ?? f.message, exitCode: EXIT.usage };
  if (SERVICE_ERRORS.has(f.name)) return { line: f.message, exitCode: EXIT.failed };
  if (f.userMessage !== undefined && f.name.endsWith('Error')) {
    const known = Object.values(EXIT) as number[];
    return {
      line: f.userMessage,
      exitCode: f.exitCode !== undefined && known.includes(f.exitCode) ? f.exitCode : EXIT.failed,
    };
  }
  if (f.code && f.path && FILE_PROBLEMS[f.code]) {
    return {
      line: `cannot use ${f.path}: ${FILE_PROBLEMS[f.code]}`,
      exitCode: f.code === 'ENOENT' || f.code === 'EISDIR' || f.code === 'ENOTDIR' ? EXIT.usage : EXIT.failed,
    };
  }
  return { line: `${f.message || f.name} (set UID2_DEBUG=1 for details)`, exitCode: EXIT.failed };
}

/** Turns any failure into one line on stderr and an exit code; a stack trace only with UID2_DEBUG set. */
export function reportError(
  err: unknown,
  stream: { write(chunk: string): unknown } = process.stderr,
  env: NodeJS.ProcessEnv = process.env,
): number {
  const { line, exitCode } = describeError(err);
  if (line !== undefined) writeLine(stream, `uid2-batch: ${line}`, { level: 'error', exit_code: exitCode });
  if (env.UID2_DEBUG && err instanceof Error && err.stack && !(err instanceof CommanderError))
    writeLine(stream, err.stack, { level: 'debug' });
  return exitCode;
}

/** A write to a terminal that has gone away (a closed ssh session, a closed pseudo-terminal). */
export function isHungUpTerminal(err: unknown): boolean {
  return fieldsOf(err).code === 'EIO';
}

/**
 * `uid2-batch map big.csv | head`: when the reader goes away, stdout errors with EPIPE. End at once with
 * exit 0 and no message; the state file stays consistent because each batch commits in one transaction.
 * A terminal that went away (EIO) is left to the SIGHUP that comes with it, which ends the run cleanly.
 */
export function endQuietlyOnBrokenPipe(
  stdout: { on(event: 'error', listener: (err: Error) => void): unknown } = process.stdout,
  exit: (code: number) => void = (code) => process.exit(code),
): void {
  stdout.on('error', (err) => {
    if (isBrokenPipe(err)) exit(EXIT.ok);
    else if (!isHungUpTerminal(err)) exit(reportError(err));
  });
}

/**
 * stderr only carries messages: when it fails (its terminal closed) the run goes on and ends by its own
 * rules, instead of dying of an unhandled 'error' event with its temp files left behind.
 */
export function ignoreStderrFailures(
  stderr: { on(event: 'error', listener: (err: Error) => void): unknown } = process.stderr,
): void {
  stderr.on('error', () => undefined);
}

/**
 * A run stopped by SIGHUP ends as if the signal had ended it (shells report 129), once its output is cleaned up
 * and its state saved. Node 20 aborts when it exits normally after its terminal hung up (it restores the
 * terminal's settings and treats the failure as fatal), so the process ends by the signal itself.
 */
function endHungUpRun(): void {
  if (stoppedBy() !== 'SIGHUP') return;
  for (const listener of process.listeners('SIGHUP')) process.off('SIGHUP', listener);
  process.kill(process.pid, 'SIGHUP');
}

/**
 * With --summary-json, the summary completed with the run's outcome. Its module (which writes files) is loaded
 * only when an argument starts like the flag, so a run without it, `--version` included, does not pay for it.
 */
async function completeSummary(args: readonly string[], error: string | undefined): Promise<void> {
  if (!args.some((a) => a.startsWith('--summary-json'))) return;
  const { commandWordsIn, completeSummaryJson, summaryJsonPathIn } = await import('./shared/summary-outcome.js');
  const summaryPath = summaryJsonPathIn(args);
  if (summaryPath === undefined) return;
  const exitCode = typeof process.exitCode === 'number' ? process.exitCode : EXIT.ok;
  const problem = await completeSummaryJson({
    path: summaryPath,
    command: commandWordsIn(args),
    exitCode,
    ...(error !== undefined ? { error } : {}),
  });
  if (problem !== undefined) sayEndProblem(problem, exitCode);
}

/** --metrics-file of a batch command, read from the raw arguments; its module is loaded only when the flag is there. */
async function metricsPathIn(args: readonly string[]): Promise<string | undefined> {
  if (!args.some((a) => a.startsWith('--metrics-file'))) return undefined;
  const { METRICS_COMMANDS } = await import('./shared/metrics-file.js');
  return METRICS_COMMANDS.has(commandWordsIn(args)) ? flagValueIn(args, '--metrics-file') : undefined;
}

/** A --metrics-file that names some other file is refused before the run starts. */
async function refuseMetricsPath(path: string | undefined): Promise<void> {
  if (path === undefined) return;
  const { refusedMetricsPath } = await import('./shared/metrics-file.js');
  // an s3:// one is checked with the summary's object (report-objects.ts), by the commands that take it
  const refusal = /^s3:\/\//i.test(path) ? undefined : await refusedMetricsPath(path);
  if (refusal !== undefined) throw new UserError(refusal, EXIT.usage);
}

/** An s3:// --summary-json or --metrics-file is checked before the run; its module is loaded only for one. */
async function refuseReportObjects(args: readonly string[], metricsPath: string | undefined): Promise<void> {
  const summaryPath = flagValueIn(args, '--summary-json');
  if (!/^s3:\/\//i.test(summaryPath ?? '') && !/^s3:\/\//i.test(metricsPath ?? '')) return;
  const objects = await import('./shared/report-objects.js');
  await objects.refuseReportObjects(commandWordsIn(args), summaryPath, metricsPath);
}

/** With --metrics-file, the run's counters, exit code and end time, whatever happened. */
async function completeMetrics(path: string | undefined, args: readonly string[], startedMs: number): Promise<void> {
  if (path === undefined) return;
  const { completeMetricsFile } = await import('./shared/metrics-file.js');
  const exitCode = typeof process.exitCode === 'number' ? process.exitCode : EXIT.ok;
  const problem = await completeMetricsFile({
    path,
    command: commandWordsIn(args),
    exitCode,
    startedMs,
    endedMs: Date.now(),
  });
  if (problem !== undefined) sayEndProblem(problem, exitCode);
}

/**
 * --log-format json (or UID2_BATCH_LOG_FORMAT=json): stderr becomes a JSON log before anything is written to it.
 * A bad value is a usage error, said as text.
 */
function startJsonLogIfAsked(args: readonly string[]): boolean {
  if (logFormatOf(args, process.env) !== 'json') return false;
  // no command (`--version`, a bad root flag): the program speaks for itself
  installJsonLog(process.stderr, commandWordsIn(args) || 'uid2-batch');
  return true;
}

/**
 * The last line of a JSON log: how the run ended, so that a log store can alert on it without the shell's status.
 * A --quiet run says it only when it did not succeed, and so does the program without a command (`--version`).
 */
function sayExitCode(args: readonly string[]): void {
  const exitCode = typeof process.exitCode === 'number' ? process.exitCode : EXIT.ok;
  const end = args.indexOf('--');
  const quiet = (end === -1 ? args : args.slice(0, end)).some((a) => a === '-q' || a === '--quiet');
  if ((quiet || commandWordsIn(args) === '') && exitCode === EXIT.ok) return;
  const level = exitCode === EXIT.ok ? 'info' : exitCode === EXIT.partial ? 'warn' : 'error';
  writeLine(process.stderr, `finished with exit code ${exitCode}`, { level, exit_code: exitCode });
}

/** An output of the run's end that could not be written: an error line, and a run that succeeded fails. */
function sayEndProblem(problem: string, exitCode: number): void {
  const code = exitCode === EXIT.ok ? EXIT.failed : exitCode;
  process.exitCode = code;
  writeLine(process.stderr, `uid2-batch: ${clipErrorLine(problem)}`, { level: 'error', exit_code: code });
}

/** For --summary-json: commander's error line as it was printed, without its `error: `; none for --help or --version. */
function usageErrorOf(err: unknown, args: readonly string[]): string | undefined {
  if (!(err instanceof CommanderError) || err.exitCode === 0) return undefined;
  return usageErrorLine(err.message, args).replace(/^error: /, '');
}

export async function main(argv: string[]): Promise<void> {
  const startedMs = Date.now();
  startBenchReport();
  endQuietlyOnBrokenPipe();
  ignoreStderrFailures();
  let error: string | undefined;
  let overlapping = false;
  const args = argv.slice(2);
  let metricsPath: string | undefined;
  let reportsRefused = false;
  let jsonLog = false;
  try {
    jsonLog = startJsonLogIfAsked(args);
    rejectSecretFlags(args);
    const wantedMetrics = await metricsPathIn(args);
    await refuseMetricsPath(wantedMetrics);
    try {
      await refuseReportObjects(args, wantedMetrics);
    } catch (err) {
      // S3 refused or cannot be reached: the reports are not written either, so the run ends with this one line
      reportsRefused = true;
      throw err;
    }
    metricsPath = wantedMetrics;
    // commander's own error lines quote what was typed: they are quoted here as every other error line is
    const program = await buildProgram(await commandsFor(argv), {
      outputError: (line, write) =>
        writeLine(jsonLog ? process.stderr : { write }, usageErrorLine(line, args), {
          level: 'error',
          exit_code: EXIT.usage,
        }),
    });
    await program.parseAsync(argv);
  } catch (err) {
    process.exitCode = reportError(err);
    error = usageErrorOf(err, args) ?? describeError(err).line;
    // the summary path may be the very file that overlaps: a refused run writes nothing at all
    overlapping = reportsRefused || (err instanceof Error && err.name === 'OverlappingOutputError');
  }
  if (stoppedBy() === 'SIGHUP' && process.exitCode === EXIT.interrupted) process.exitCode = EXIT.hangup;
  if (!overlapping) await completeSummary(args, error);
  if (!overlapping) await completeMetrics(metricsPath, args, startedMs);
  if (jsonLog) sayExitCode(args);
  endHungUpRun();
}
