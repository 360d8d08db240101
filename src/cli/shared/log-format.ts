// --log-format text|json: in json, every line the program writes to stderr becomes one JSON object (for log stores).
import type { FieldsWriter, LineFields, LogLevel } from '../../pipeline/run/log-lines.js';
import { UserError } from './exit-codes.js';
import { flagValueIn } from './raw-args.js';
import { quoted } from './user-values.js';

export const LOG_FORMATS = ['text', 'json'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

export const LOG_FORMAT_VARIABLE = 'UID2_BATCH_LOG_FORMAT';

function isLogFormat(value: string): value is LogFormat {
  return (LOG_FORMATS as readonly string[]).includes(value);
}

/**
 * The log format of a command line: --log-format, else UID2_BATCH_LOG_FORMAT, else text. Read from the raw
 * arguments, before commander, so that even commander's own usage errors are written in it. A value that is
 * neither is a usage error naming the allowed values.
 */
export function logFormatOf(args: readonly string[], env: NodeJS.ProcessEnv): LogFormat {
  const flag = flagValueIn(args, '--log-format');
  const [where, value] =
    flag !== undefined ? ['--log-format', flag] : [LOG_FORMAT_VARIABLE, env[LOG_FORMAT_VARIABLE] ?? ''];
  if (value === '' || isLogFormat(value)) return value === '' ? 'text' : value;
  throw new UserError(`${where} must be ${LOG_FORMATS.join(' or ')} (got ${quoted(value)})`);
}

// CSI and OSC sequences: no colours or cursor moves inside a JSON log line
// biome-ignore lint/suspicious/noControlCharactersInRegex: the escape character is what is matched
const TERMINAL_CODES = /\u001b\[[0-9;?]*[ -/]*[@-~]|\u001b\][^\u0007]*\u0007|\r/g;
/** The program's name (and a command's) before a line: the `command` field says it. */
const PROGRAM_PREFIX = /^uid2-batch(?: [a-z][a-z-]*)?: /;
const LEVEL_PREFIX = /^(warning|error): /;
/** Node's own warnings (`process.emitWarning`), which it writes to stderr itself. */
const NODE_WARNING = /^\(node:\d+\) (?:\[[^\]]*\] )?\w*Warning: /;

/** A line as a log entry: its level from a `warning: ` or `error: ` lead unless given, its text without prefixes. */
function entryOf(line: string, fields: LineFields): { level: LogLevel; message: string } {
  let message = line.replace(TERMINAL_CODES, '').replace(PROGRAM_PREFIX, '');
  let level = fields.level;
  const lead = LEVEL_PREFIX.exec(message);
  if (lead !== null) {
    message = message.slice(lead[0].length);
    level ??= lead[1] === 'warning' ? 'warn' : 'error';
  }
  if (NODE_WARNING.test(message)) level ??= 'warn';
  return { level: level ?? 'info', message };
}

/** One JSON log line: time (ISO 8601 UTC), level, command, message, then the line's own fields. */
export function jsonLogLine(command: string, line: string, fields: LineFields, nowMs: number): string {
  const { level, message } = entryOf(line, fields);
  const { level: _, ...rest } = fields;
  return `${JSON.stringify({ time: new Date(nowMs).toISOString(), level, command, message, ...rest })}\n`;
}

interface LogStream {
  write(chunk: string | Uint8Array, ...rest: unknown[]): boolean;
  isTTY?: boolean;
}

/**
 * Turns `stream` (process.stderr) into a JSON log: each line written to it, by this program or a library,
 * leaves as one JSON object, and `writeFields` adds figures to a line. It reports itself as no terminal, so no
 * spinner or colour is drawn on it. A line written in pieces is held until its end (or the process's exit).
 */
export function installJsonLog(
  stream: LogStream & Partial<FieldsWriter>,
  command: string,
  now: () => number = Date.now,
): void {
  const write = stream.write.bind(stream);
  let pending = '';
  const emit = (line: string, fields: LineFields): void => {
    if (line.replace(TERMINAL_CODES, '').trim() === '') return;
    write(jsonLogLine(command, line, fields, now()));
  };
  stream.write = (chunk: string | Uint8Array, ...rest: unknown[]): boolean => {
    const text = pending + (typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
    const lines = text.split('\n');
    pending = lines.pop() ?? '';
    for (const line of lines) emit(line, {});
    const done = rest.find((r): r is () => void => typeof r === 'function');
    done?.();
    return true;
  };
  // one entry even when the text has several lines (a stack trace): JSON keeps its line feeds escaped
  stream.writeFields = (line: string, fields: LineFields): void => emit(line, fields);
  Object.defineProperty(stream, 'isTTY', { value: false, configurable: true });
  process.once('exit', () => {
    if (pending !== '') emit(pending, {});
    pending = '';
  });
}
