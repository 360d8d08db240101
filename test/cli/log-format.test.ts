import { describe, expect, it } from 'vitest';
import { installJsonLog, jsonLogLine, logFormatOf } from '../../src/cli/shared/log-format.js';
import { createProgress, type Timers } from '../../src/cli/shared/progress.js';
import { writeLine } from '../../src/pipeline/run/log-lines.js';
import { printSummary, makeSummary } from '../../src/pipeline/run/summary.js';

const NOW = Date.UTC(2027, 0, 5, 12, 30, 0, 250);

/** A stderr stand-in turned into a JSON log; `entries` parses what reached the real stream. */
function jsonStderr(command = 'map') {
  const chunks: string[] = [];
  const stream: { write(chunk: string | Uint8Array, ...rest: unknown[]): boolean; isTTY?: boolean } = {
    isTTY: true,
    write: (chunk) => {
      chunks.push(String(chunk));
      return true;
    },
  };
  installJsonLog(stream, command, () => NOW);
  return {
    stream,
    chunks,
    entries: () =>
      chunks
        .join('')
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

describe('logFormatOf', () => {
  it('takes the flag, then UID2_BATCH_LOG_FORMAT, else text', () => {
    expect(logFormatOf(['map', 'a.csv'], {})).toBe('text');
    expect(logFormatOf(['map', 'a.csv'], { UID2_BATCH_LOG_FORMAT: 'json' })).toBe('json');
    expect(logFormatOf(['map', '--log-format', 'text'], { UID2_BATCH_LOG_FORMAT: 'json' })).toBe('text');
    expect(logFormatOf(['--log-format=json', 'map'], {})).toBe('json');
    // the flag wins over a bad variable: what the user typed last is what counts
    expect(logFormatOf(['map', '--log-format', 'json'], { UID2_BATCH_LOG_FORMAT: 'xml' })).toBe('json');
  });

  it('a bad value is one usage error naming the allowed values', () => {
    expect(() => logFormatOf(['map', '--log-format', 'xml'], {})).toThrow(
      expect.objectContaining({ message: "--log-format must be text or json (got 'xml')", exitCode: 2 }),
    );
    expect(() => logFormatOf(['map'], { UID2_BATCH_LOG_FORMAT: 'JSON ' })).toThrow(
      "UID2_BATCH_LOG_FORMAT must be text or json (got 'JSON ')",
    );
  });
});

describe('the JSON log', () => {
  it('one object a line: time, level, command, message; levels from warning: and error: leads', () => {
    const log = jsonStderr();
    log.stream.write('uid2-batch: using columns a\n');
    log.stream.write('uid2-batch: warning: the v2 API is deprecated\nerror: unknown option\n');
    expect(log.entries()).toEqual([
      { time: '2027-01-05T12:30:00.250Z', level: 'info', command: 'map', message: 'using columns a' },
      { time: '2027-01-05T12:30:00.250Z', level: 'warn', command: 'map', message: 'the v2 API is deprecated' },
      { time: '2027-01-05T12:30:00.250Z', level: 'error', command: 'map', message: 'unknown option' },
    ]);
  });

  it("Node's own warnings are level warn", () => {
    const log = jsonStderr();
    log.stream.write('(node:123) ExperimentalWarning: something\n(node:123) [DEP0005] DeprecationWarning: Buffer()\n');
    expect(log.entries().map((e) => e.level)).toEqual(['warn', 'warn']);
  });

  it('holds a line written in pieces until its end, drops blank lines and terminal codes', () => {
    const log = jsonStderr();
    log.stream.write('map: 10 ');
    expect(log.chunks).toEqual([]);
    log.stream.write(Buffer.from('rows\n\n\u001b[32mgreen\u001b[39m\r\n'));
    expect(log.entries().map((e) => e.message)).toEqual(['map: 10 rows', 'green']);
  });

  it('is no terminal, so nothing draws a spinner on it', () => {
    expect(jsonStderr().stream.isTTY).toBe(false);
  });

  it('a line with figures keeps them as fields; a plain stream gets the same line as text', () => {
    const summary = makeSummary({
      command: 'map',
      rows: 10,
      status: { mapped: 9, invalid: 1 },
      startedMs: 0,
      endedMs: 2000,
    });
    const log = jsonStderr();
    printSummary(summary, log.stream);
    const [entry] = log.entries();
    expect(entry).toMatchObject({ level: 'info', command: 'map', counts: summary });
    const text: string[] = [];
    printSummary(summary, { write: (c: string) => text.push(c) });
    expect(entry?.message).toBe(text.join('').trimEnd());
    expect(text.join('')).toMatch(/^map: 10 rows in 2 s .*\n$/);
  });

  it('an error line with its exit code; a stack stays one entry', () => {
    const log = jsonStderr('remap-due');
    writeLine(log.stream, 'uid2-batch: the state file is locked', { level: 'error', exit_code: 2 });
    writeLine(log.stream, 'Error: x\n    at y', { level: 'debug' });
    expect(log.entries()).toEqual([
      {
        time: expect.any(String),
        level: 'error',
        command: 'remap-due',
        message: 'the state file is locked',
        exit_code: 2,
      },
      { time: expect.any(String), level: 'debug', command: 'remap-due', message: 'Error: x\n    at y' },
    ]);
  });

  it('jsonLogLine escapes what JSON must', () => {
    const line = jsonLogLine('map', 'a "quoted" \\ name', {}, NOW);
    expect(line.endsWith('\n')).toBe(true);
    expect(line.slice(0, -1)).not.toContain('\n');
    expect(JSON.parse(line).message).toBe('a "quoted" \\ name');
  });

  it('progress: plain lines at the interval, each with its counts', () => {
    const log = jsonStderr();
    let t = NOW;
    const ticks: (() => void)[] = [];
    const timers: Timers = { setInterval: (fn) => ticks.push(fn), clearInterval: () => undefined };
    const progress = createProgress({ label: 'map', stream: log.stream, env: {}, now: () => t, timers });
    expect(progress.mode).toBe('lines');
    progress.update({ done: 5000, total: 20_000, retries: 2, http429: 1 });
    t += 10_000;
    for (const tick of ticks) tick();
    progress.stop();
    const [entry] = log.entries();
    expect(entry).toMatchObject({
      level: 'info',
      command: 'map',
      counts: { rows: 5000, rows_total: 20_000, rows_per_s: 500, retries: 2, http_429: 1 },
    });
    expect(entry?.message).toMatch(/^map: 5,000\/20,000 rows \(25\.0%\), 500 rows\/s/);
  });
});
