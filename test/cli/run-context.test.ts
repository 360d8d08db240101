import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { resolveFor, sayTo, serviceTargetOf, type CommandDeps } from '../../src/cli/shared/command-context.js';
import { chooseConcurrency, connect } from '../../src/pipeline/run/connection.js';
import { EXIT } from '../../src/cli/shared/exit-codes.js';
import type { OutputFlags } from '../../src/cli/shared/options.js';
import {
  exitCodeOf,
  remapRunArgs,
  reportRun,
  requestCounters,
  withRunOutput,
  type BatchRunResult,
} from '../../src/pipeline/run/run-report.js';
import { makeSummary } from '../../src/pipeline/run/summary.js';
import { resolveConfig, type ResolvedConfig } from '../../src/config/index.js';
import type { TableSink } from '../../src/pipeline/io/table.js';

const dir = mkdtempSync(join(tmpdir(), 'uid2-run-context-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function captured(): { stream: PassThrough; text(): string } {
  const stream = new PassThrough();
  let text = '';
  stream.on('data', (chunk: Buffer) => (text += chunk.toString()));
  return { stream, text: () => text };
}

function depsWith(stderr: PassThrough, stdout: PassThrough = new PassThrough()): CommandDeps {
  return { stdout, stderr, env: {}, now: () => 1_000 };
}

function recordingSink(): TableSink & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    writeRows: async () => {
      calls.push('write');
    },
    writeEncoded: async () => {
      calls.push('write');
    },
    commit: async () => {
      calls.push('commit');
    },
    abort: async () => {
      calls.push('abort');
    },
  };
}

const localConfig = (): ResolvedConfig =>
  resolveConfig({ env: 'local' }, {}, {}, { require: { apiKey: false, clientSecret: false } });

describe('exitCodeOf', () => {
  const result = (kind: BatchRunResult['outcome']['kind'], error = 0): BatchRunResult => ({
    outcome: { kind },
    counts: { status: { error } },
  });

  it('maps each outcome of a batch run to its exit code', () => {
    expect(exitCodeOf(result('completed'))).toBe(EXIT.ok);
    expect(exitCodeOf(result('completed', 2))).toBe(EXIT.partial);
    expect(exitCodeOf(result('interrupted'))).toBe(EXIT.interrupted);
    expect(exitCodeOf(result('auth-refused'))).toBe(EXIT.auth);
    expect(exitCodeOf(result('failed'))).toBe(EXIT.failed);
  });
});

describe('reportRun', () => {
  const summary = makeSummary({ command: 'remap-due', rows: 3, startedMs: 0, endedMs: 1_000 });

  it('keeps the output, says the summary line and writes --summary-json', async () => {
    const err = captured();
    const sink = recordingSink();
    const path = join(dir, 'summary.json');
    await reportRun(
      sink,
      true,
      'remap-due: 3 entries',
      summary,
      { format: 'csv', summaryJson: path },
      depsWith(err.stream),
    );
    expect(sink.calls).toEqual(['commit']);
    expect(err.text()).toBe('remap-due: 3 entries\n');
    expect(JSON.parse(readFileSync(path, 'utf8')).rows).toBe(3);
  });

  it('drops the output when told, and says nothing under --quiet', async () => {
    const err = captured();
    const sink = recordingSink();
    await reportRun(sink, false, 'remap-due: 3 entries', summary, { format: 'csv', quiet: true }, depsWith(err.stream));
    expect(sink.calls).toEqual(['abort']);
    expect(err.text()).toBe('');
  });
});

describe('withRunOutput', () => {
  it('leaves no output file behind when the work throws, and passes the error on', async () => {
    const output: OutputFlags = { format: 'csv', output: join(dir, 'changes.csv'), quiet: true };
    const failure = new Error('batch failed');
    await expect(
      withRunOutput(['kind', 'hash'], 'remap-due', true, output, depsWith(new PassThrough()), async (sink) => {
        await sink.writeRows([['email', 'h1']]);
        throw failure;
      }),
    ).rejects.toBe(failure);
    // neither the target nor the temp file beside it
    expect(readdirSync(dir).filter((name) => name.includes('changes.csv'))).toEqual([]);
  });

  it('gives the work an output with the header, written when it commits', async () => {
    const output: OutputFlags = { format: 'csv', output: join(dir, 'kept.csv'), quiet: true };
    const rows = await withRunOutput(
      ['kind', 'hash'],
      'migrate',
      false,
      output,
      depsWith(new PassThrough()),
      async (sink, progress) => {
        await sink.writeRows([['email', 'h1']]);
        progress.stop();
        await sink.commit();
        return 1;
      },
    );
    expect(rows).toBe(1);
    expect(readFileSync(join(dir, 'kept.csv'), 'utf8')).toBe('kind,hash\nemail,h1\n');
  });
});

describe('chooseConcurrency', () => {
  const withEnv = (isPublic: boolean) =>
    serviceTargetOf({ ...localConfig(), isLocal: false, env: { ...localConfig().env, isPublic } });

  it('lowers more than 20 to 20 against the public service, and says so once', () => {
    const lines: string[] = [];
    expect(chooseConcurrency(50, withEnv(true), (l) => lines.push(l))).toBe(20);
    expect(lines).toEqual([
      '--concurrency 50 lowered to 20: the public service allows 20 map requests in flight (a private operator or --base-url allows more)',
    ]);
  });

  it('takes what is asked elsewhere, 20 when nothing is', () => {
    const lines: string[] = [];
    expect(chooseConcurrency(50, withEnv(false), (l) => lines.push(l))).toBe(50);
    expect(chooseConcurrency(undefined, withEnv(true), (l) => lines.push(l))).toBe(20);
    expect(lines).toEqual([]);
  });
});

describe('the command context', () => {
  it('sayTo prefixes lines and is silent under --quiet', () => {
    const loud = captured();
    sayTo({ format: 'csv' }, { stderr: loud.stream })('3 entries left');
    const quiet = captured();
    sayTo({ format: 'csv', quiet: true }, { stderr: quiet.stream })('3 entries left');
    expect(loud.text()).toBe('uid2-batch: 3 entries left\n');
    expect(quiet.text()).toBe('');
  });

  it('resolveFor takes the injected resolver when there is one', () => {
    const injected = localConfig();
    const asked: unknown[] = [];
    const deps: CommandDeps = {
      ...depsWith(new PassThrough()),
      resolveConfig: (flags, require) => {
        asked.push([flags, require]);
        return injected;
      },
    };
    expect(resolveFor({ env: 'prod' }, deps, { apiKey: true, clientSecret: false })).toBe(injected);
    expect(asked).toEqual([[{ env: 'prod' }, { apiKey: true, clientSecret: false }]]);
  });

  it('remapRunArgs keeps the flags a re-run needs and nothing else', () => {
    expect(
      remapRunArgs({ limit: 10, output: { format: 'jsonl', output: 'out.jsonl', summaryJson: 's.json' } }),
    ).toEqual({ limit: 10, output: 'out.jsonl', format: 'jsonl' });
    expect(remapRunArgs({ now: '2026-01-01', concurrency: 4, output: { format: 'csv' } })).toEqual({
      now: '2026-01-01',
      concurrency: 4,
      output: '-',
      format: 'csv',
    });
  });

  it('connect starts the embedded service for --env local; the client maps against it and close stops both', async () => {
    const connection = await connect(serviceTargetOf(localConfig()), { connections: 2 });
    try {
      expect(connection.target.baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const body = await connection.client.mapV3({ email: ['run-context@example.com'] });
      expect(body.email).toHaveLength(1);
      expect(requestCounters(connection.client.stats)).toEqual({ requests: 1, retries: 0, http_429: 0 });
    } finally {
      await connection.close();
    }
  });
});
